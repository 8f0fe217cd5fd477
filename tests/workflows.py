"""Workflow definitions several test modules run (one copy each)."""

from tests.support.definitions import workflow

GATED_APPROVAL = workflow(
    "gated", approvers=["boss@example.com"], inputs={"amount": "number"}
).steps("""
      - {step_id: prepare, kind: transform, transform: {doubled: "amount * 2"}}
      - step_id: gate
        kind: approval
        depends_on: [prepare]
        approval: {title: "Pay {{ doubled }}?", show_keys: [doubled], editable_keys: [doubled],
                   timeout_seconds: 60}
        branches: {approved: pay, rejected: refuse, timed_out: refuse}
      - {step_id: pay, kind: transform, transform: {paid: "doubled"}}
      - {step_id: refuse, kind: terminate, terminate: {status: failed, message: "refused"}}
""")
"""Double an amount, ask boss@example.com (the doubled amount shown and editable), then pay or
end the run failed."""

BOSS_APPROVES_40 = {
    "decision": "approved",
    "approver": "boss@example.com",
    "edits": {"doubled": 40},
}
"""The answer that resumes a ``GATED_APPROVAL`` run: approved, the doubled amount edited to 40."""

ASK_THEN_DONE = workflow("gated", approvers=["boss@example.com"]).steps("""
      - step_id: gate
        kind: approval
        approval: {title: "Go?", timeout_seconds: 60}
        branches: {approved: done, rejected: done, timed_out: done}
      - {step_id: done, kind: transform, transform: {ok: "1"}}
""")
"""Ask boss@example.com "Go?", then end succeeded whatever the answer (workflow ``gated``)."""


def pay_after_approval(*approvers: str, timeout_seconds: int) -> str:
    """Workflow ``gated``: compute an amount (42), ask ``approvers`` to pay it (for
    ``timeout_seconds``), then end succeeded with ``paid`` whatever the answer."""
    return f"""
workflows:
  - plan_id: gated
    memory: false
    approvers: [{", ".join(approvers)}]
    steps:
      - {{step_id: prepare, kind: transform, transform: {{amount: "40 + 2"}}}}
      - step_id: gate
        kind: approval
        depends_on: [prepare]
        approval: {{title: "Pay?", timeout_seconds: {timeout_seconds}}}
        branches: {{approved: done, rejected: done, timed_out: done}}
      - {{step_id: done, kind: transform, transform: {{paid: "amount"}}}}
"""


LINEAR = workflow("linear", inputs={"x": "integer"}).steps("""
      - {step_id: double, kind: transform, transform: {y: "x * 2"}}
      - {step_id: add, kind: transform, depends_on: [double], transform: {z: "y + 1"}}
      - {step_id: last, kind: transform, depends_on: [add], transform: {w: "z + 1"}}
""")
"""Three transforms in a row: ``y = 2x``, ``z = y + 1``, ``w = z + 1``."""

SHOP_RESOURCE = "browser:session-1"
SHOP_ON_A_RESOURCE = workflow("shop").steps(f"""
      - {{step_id: browse, kind: transform, transform: {{done: "1"}}, resource: "{SHOP_RESOURCE}"}}
""")
"""One step that holds ``SHOP_RESOURCE`` (a browser session) while it runs."""
