"""Workflow definitions several test modules run (one copy each)."""

GATED_APPROVAL = """
workflows:
  - plan_id: gated
    memory: false
    approvers: [boss@example.com]
    inputs_schema: {properties: {amount: {type: number}}}
    steps:
      - {step_id: prepare, kind: transform, transform: {doubled: "amount * 2"}}
      - step_id: gate
        kind: approval
        depends_on: [prepare]
        approval: {title: "Pay {{ doubled }}?", show_keys: [doubled], editable_keys: [doubled],
                   timeout_seconds: 60}
        branches: {approved: pay, rejected: refuse, timed_out: refuse}
      - {step_id: pay, kind: transform, transform: {paid: "doubled"}}
      - {step_id: refuse, kind: terminate, terminate: {status: failed, message: "refused"}}
"""
"""Double an amount, ask boss@example.com (the doubled amount shown and editable), then pay or
end the run failed."""
