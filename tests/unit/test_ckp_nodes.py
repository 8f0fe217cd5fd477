"""Every CKP node type runs with seed 001 §6.2's semantics, compiled into the one engine's plan and
run on LangGraph in memory: sequence, processing, transform, parallel, logic, loop, verification,
llm_action, human_approval, subflow, terminate — and error handlers, the procedure's on_failure
and the ``error`` object (``error.node_id``, ``error.message``) they see."""

from __future__ import annotations

from typing import Any

from langorch.llm import LLMRegistry
from tests.ckp_support import Runner, procedure


def seq(*steps: dict[str, Any], **node: Any) -> dict[str, Any]:
    return {"type": "sequence", "steps": list(steps), **node}


def end(status: str = "success", **node: Any) -> dict[str, Any]:
    return {"type": "terminate", "status": status, **node}


def setv(variable: str, value: Any) -> dict[str, Any]:
    return {"action": "set_variable", "variable": variable, "value": value}


def run_from(start: str, nodes: dict[str, Any], **document: Any) -> Runner:
    """A runner of the procedure of ``nodes`` that starts at ``start``."""
    return Runner(procedure(start, nodes, **document))


def parallel(starts: dict[str, str], *, next_node: str) -> dict[str, Any]:
    """A parallel node waiting for all its branches (branch id -> its start node)."""
    branches = [{"branch_id": b, "start_node": start} for b, start in starts.items()]
    return {
        "type": "parallel",
        "branches": branches,
        "wait_strategy": "all",
        "next_node": next_node,
    }


def logic(*rules: tuple[str, str], default: str) -> dict[str, Any]:
    """A logic node: the first (condition, next node) rule that holds, else ``default``."""
    return {
        "type": "logic",
        "rules": [{"condition": c, "next_node": n} for c, n in rules],
        "default_next_node": default,
    }


# --- sequence, processing, transform ----------------------------------------------------------


def test_a_sequence_runs_its_steps_in_order_and_each_sees_what_the_earlier_wrote() -> None:
    # Given a sequence whose second step formats what the first set
    run = run_from(
        "s",
        {
            "s": seq(
                setv("who", "{{name}}"),
                {
                    "action": "format_string",
                    "template": "hello {{who}}",
                    "output_variable": "greeting",
                },
                next_node="done",
            ),
            "done": end(),
        },
    )
    # When it runs
    run.start(name="Ada")
    # Then both ran in order, the second with the first's output
    assert run.shared["greeting"] == "hello Ada"
    assert [c[1] for c in run.calls()] == ["set_variable", "format_string"]


def test_a_processing_node_parses_csv_and_length_counts_the_rows() -> None:
    # Given a processing node parsing a CSV, then logging its size with .length
    run = run_from(
        "parse",
        {
            "parse": {
                "type": "processing",
                "operations": [
                    {"action": "parse_csv", "source": "{{csv}}", "output_variable": "rows"},
                    {
                        "action": "format_string",
                        "template": "{{rows.length}} rows",
                        "output_variable": "said",
                    },
                ],
                "next_node": "done",
            },
            "done": end(),
        },
    )
    # When it runs on two rows
    run.start(csv="id,amount\nA,10\nB,20\n")
    # Then the rows are dicts by header, and .length counted them
    assert run.shared["rows"] == [{"id": "A", "amount": "10"}, {"id": "B", "amount": "20"}]
    assert run.shared["said"] == "2 rows"


def test_a_transform_node_filters_maps_sorts_deduplicates_and_aggregates() -> None:
    # Given each transformation of the syntax reference over a list of invoices
    transformations = [
        {
            "type": "filter",
            "source_variable": "invoices",
            "expression": "item.amount > 10",
            "output_variable": "large",
        },
        {
            "type": "map",
            "source_variable": "large",
            "expression": "item.id",
            "output_variable": "ids",
        },
        {
            "type": "sort",
            "source_variable": "invoices",
            "params": {"key": "amount", "reverse": True},
            "output_variable": "by_amount",
        },
        {
            "type": "deduplicate",
            "source_variable": "invoices",
            "params": {"key": "vendor"},
            "output_variable": "vendors",
        },
        {
            "type": "aggregate",
            "source_variable": "invoices",
            "params": {"function": "sum", "field": "amount"},
            "output_variable": "total",
        },
    ]
    run = run_from(
        "t",
        {
            "t": {"type": "transform", "transformations": transformations, "next_node": "e"},
            "e": end(),
        },
    )
    invoices = [
        {"id": "A", "vendor": "v1", "amount": 5},
        {"id": "B", "vendor": "v2", "amount": 50},
        {"id": "C", "vendor": "v1", "amount": 20},
    ]
    # When it runs
    run.start(invoices=invoices)
    # Then each operation gave its result
    assert run.shared["ids"] == ["B", "C"]
    assert [i["id"] for i in run.shared["by_amount"]] == ["B", "C", "A"]
    assert [i["id"] for i in run.shared["vendors"]] == ["A", "B"]
    assert run.shared["total"] == 75


# --- parallel, logic --------------------------------------------------------------------------


def test_a_parallel_node_runs_every_branch_and_its_next_node_once_after_all() -> None:
    # Given two branches (one of two nodes) that join at `report`
    run = run_from(
        "fork",
        {
            "fork": parallel({"a": "a1", "b": "b1"}, next_node="report"),
            "a1": seq(setv("a", 1), next_node="a2"),
            "a2": seq(setv("a2", 2)),
            "b1": seq(setv("b", 3)),
            "report": seq(
                {"action": "calculate", "expression": "a + a2 + b", "output_variable": "sum"},
                next_node="done",
            ),
            "done": end(),
        },
    )
    # When it runs
    run.start()
    # Then both branches ran, and report ran once, after both, with all their results
    assert run.shared["sum"] == 6
    assert run.path.count("report") == 1
    assert run.path.index("report") > max(run.path.index("a2"), run.path.index("b1"))


def _gate(amount: int) -> Runner:
    run = run_from(
        "gate",
        {
            "gate": logic(
                ("{{invoices.length}} > 10", "many"),
                ("{{invoices.length}} > 2", "some"),
                default="few",
            ),
            "many": end(outputs={"size": "many"}),
            "some": end(outputs={"size": "some"}),
            "few": end(outputs={"size": "few"}),
        },
    )
    run.start(invoices=list(range(amount)))
    return run


def test_logic_routes_to_the_first_rule_that_holds() -> None:
    # Given 11 invoices (both rules hold), When the gate runs, Then the first rule wins
    assert _gate(11).state["outputs"]["size"] == "many"
    assert _gate(3).state["outputs"]["size"] == "some"


def test_logic_takes_the_default_next_node_when_no_rule_holds() -> None:
    assert _gate(1).state["outputs"]["size"] == "few"


# --- loop -------------------------------------------------------------------------------------


def _loop(**loop: Any) -> dict[str, Any]:
    return procedure(
        "each",
        {
            "each": {
                "type": "loop",
                "iterator": "{{items}}",
                "iterator_variable": "it",
                "index_variable": "n",
                "body_node": "double",
                "collect_variable": "doubled",
                "next_node": "done",
                **loop,
            },
            "double": seq(
                {"action": "calculate", "expression": "10 / it", "output_variable": "tenth"},
                {"action": "calculate", "expression": "n", "output_variable": "position"},
                next_node="each",
            ),
            "done": end(outputs={"all": "{{doubled}}"}),
        },
    )


def test_a_loop_runs_its_body_per_item_with_the_item_and_index_and_collects() -> None:
    # Given a loop over three items whose body returns to the loop
    run = Runner(_loop())
    # When it runs
    run.start(items=[1, 2, 5])
    # Then the body saw each item and its index, and each iteration was collected
    assert run.shared["doubled"] == [
        {"tenth": 10.0, "position": 0},
        {"tenth": 5.0, "position": 1},
        {"tenth": 2.0, "position": 2},
    ]
    assert run.path.count("double") == 3


def test_a_loop_stops_at_max_iterations() -> None:
    run = Runner(_loop(max_iterations=2))
    run.start(items=[1, 2, 5])
    assert [r["tenth"] for r in run.shared["doubled"]] == [10.0, 5.0]


def test_continue_on_error_goes_on_with_the_next_item_after_a_failing_one() -> None:
    # Given a body that fails on 0 (10 / 0), with continue_on_error
    run = Runner(_loop(continue_on_error=True))
    # When it runs over 1, 0, 5
    run.start(items=[1, 0, 5])
    # Then the failing item is recorded as failed, the others as done, and the run goes on
    failed = [r for r in run.state["block_results"] if not r["success"]]
    assert [r["step_id"] for r in failed] == ["double"]
    assert run.shared["doubled"][2]["tenth"] == 2.0
    assert run.state["status"] == "succeeded"


def test_without_continue_on_error_a_failing_item_fails_the_run() -> None:
    run = Runner(_loop())
    try:
        run.start(items=[1, 0, 5])
    except Exception as exc:  # the graph raises: the run has no error route
        assert "division by zero" in str(exc)
    else:
        raise AssertionError("the run should have failed")


# --- verification -----------------------------------------------------------------------------


def _verify(on_fail: str, **nodes: Any) -> Runner:
    run = run_from(
        "check",
        {
            "check": {
                "type": "verification",
                "checks": [
                    {
                        "id": "enough",
                        "condition": "{{total}} >= 100",
                        "on_fail": on_fail,
                        "message": "total {{total}} is under 100",
                    }
                ],
                "next_node": "ok",
            },
            "ok": end(outputs={"via": "ok"}),
            "failed": end(status="failed", outputs={"via": "on_failure"}),
            **nodes,
        },
        global_config={"on_failure": "failed"},
    )
    run.start(total=40)
    return run


def test_a_failing_check_that_fails_goes_to_the_error_route_with_its_message() -> None:
    run = _verify("fail_workflow")
    assert run.state["outputs"]["via"] == "on_failure"
    assert run.state["error"]["node_id"] == "check"
    assert "total 40 is under 100" in run.state["error"]["message"]


def test_a_failing_check_that_warns_is_on_the_timeline_and_the_run_goes_on() -> None:
    run = _verify("warn")
    assert run.state["outputs"]["via"] == "ok"
    assert ("check", "check enough", "warn") in run.calls()


def test_a_failing_check_that_names_a_node_routes_there() -> None:
    run = _verify("fallback", fallback=end(status="failed", outputs={"via": "fallback"}))
    assert run.state["outputs"]["via"] == "fallback"
    assert run.shared["check_failed_checks"] == ["enough"]


# --- llm_action -------------------------------------------------------------------------------


def test_an_llm_action_maps_its_answer_with_json_extract_and_regex() -> None:
    # Given an llm_action whose outputs extract fields of the answer, and a scripted model
    document = procedure(
        "classify",
        {
            "classify": {
                "type": "llm_action",
                "prompt": "Classify invoice {{invoice.id}}",
                "outputs": {
                    "account": "json_extract: gl.account",
                    "score": "json_extract: confidence",
                    "code": "regex: ([0-9]{4})",
                },
                "output_types": {"gl": "object", "confidence": "number"},
                "next_node": "done",
            },
            "done": end(),
        },
    )
    llm = LLMRegistry(
        offline_script={"classify": {"gl": {"account": "6100 supplies"}, "confidence": 0.9}}
    )
    run = Runner(document, context={"llm": llm})
    # When it runs
    run.start(invoice={"id": "A"})
    # Then each mapping took its part of the answer
    assert run.shared["account"] == "6100 supplies"
    assert run.shared["score"] == 0.9
    assert run.shared["code"] == "6100"
    assert run.state["usage"][0]["step_id"] == "classify"


def test_an_llm_action_without_outputs_keeps_the_answer_under_its_node() -> None:
    document = procedure(
        "ask",
        {"ask": {"type": "llm_action", "prompt": "Say hi", "next_node": "done"}, "done": end()},
    )
    llm = LLMRegistry(offline_script={"ask": {"llm_response": "hi there"}})
    run = Runner(document, context={"llm": llm})
    run.start()
    assert run.shared["ask_response"] == "hi there"


# --- human_approval ---------------------------------------------------------------------------


def _approval(**node: Any) -> Runner:
    run = run_from(
        "ask",
        {
            "ask": {
                "type": "human_approval",
                "prompt": "Post {{count}} invoices?",
                "approvers": ["finance@example.com"],
                "timeout_ms": 3_600_000,
                "escalation_contact": "controller@example.com",
                "on_approve": "yes",
                "on_reject": "no",
                "on_timeout": "late",
                **node,
            },
            "yes": end(outputs={"via": "approved"}),
            "no": end(status="failed", outputs={"via": "rejected"}),
            "late": end(status="failed", outputs={"via": "timed out"}),
        },
    )
    run.start(count=12)
    return run


def test_an_approval_parks_the_run_with_its_prompt_and_escalation() -> None:
    run = _approval()
    assert run.interrupted
    [task] = run.graph.get_state(run.config).tasks
    request = task.interrupts[0].value
    assert request["message"] == "Post 12 invoices?"
    assert request["approvers"] == ["finance@example.com"]
    assert request["timeout_seconds"] == 3600
    assert request["policy"]["escalation"] == [
        {"after": 1800, "approvers": ["controller@example.com"]}
    ]


def test_approve_reject_and_timeout_each_go_where_the_node_says() -> None:
    for decision, via in (
        ("approved", "approved"),
        ("rejected", "rejected"),
        ("timed_out", "timed out"),
    ):
        run = _approval()
        run.resume(decision, approver="finance@example.com")
        assert run.state["outputs"]["via"] == via


def test_timeout_action_auto_approve_approves_on_timeout() -> None:
    run = _approval(timeout_action="auto_approve")
    run.resume("timed_out")
    assert run.state["outputs"]["via"] == "approved"


# --- subflow, terminate -----------------------------------------------------------------------


def test_a_subflow_runs_the_other_procedure_with_its_input_and_output_mappings() -> None:
    # Given a child procedure doubling `n`, and a parent mapping its `amount` in and `twice` out
    child = procedure(
        "double",
        {
            "double": seq(
                {"action": "calculate", "expression": "n * 2", "output_variable": "result"},
                next_node="done",
            ),
            "done": end(),
        },
        procedure_id="doubler",
    )
    parent = procedure(
        "call",
        {
            "call": {
                "type": "subflow",
                "procedure_id": "doubler",
                "input_mapping": {"n": "{{amount}}"},
                "output_mapping": {"twice": "result"},
                "next_node": "done",
            },
            "done": end(outputs={"twice": "{{twice}}"}),
        },
    )
    run = Runner(parent, others=[child])
    # When the parent runs
    run.start(amount=21)
    # Then the child ran with n = 21 and its result came back as `twice`
    assert run.state["outputs"]["twice"] == 42


def test_terminate_ends_with_its_status_outputs_and_final_audit_log() -> None:
    run = run_from(
        "stop",
        {
            "stop": end(
                status="failed",
                message="stopped for {{who}}",
                outputs={"who": "{{who}}"},
                final_audit_log={"outcome": "stopped", "by": "{{who}}"},
            )
        },
    )
    run.start(who="ops")
    assert run.state["status"] == "failed"
    assert run.state["last_error"] == "stopped for ops"
    assert run.state["outputs"] == {
        "who": "ops",
        "final_audit_log": {"outcome": "stopped", "by": "ops"},
    }


# --- errors -----------------------------------------------------------------------------------


def _failing(**node: Any) -> dict[str, Any]:
    return seq({"action": "calculate", "expression": "1 / zero", "output_variable": "x"}, **node)


def test_an_error_handler_fallback_node_takes_a_failing_node_with_the_error_object() -> None:
    # Given a node that fails, with a fallback node that reports the error
    run = run_from(
        "risky",
        {
            "risky": _failing(
                next_node="done", error_handlers=[{"error_type": "*", "fallback_node": "fix"}]
            ),
            "fix": seq(setv("said", "{{error.node_id}}: {{error.message}}"), next_node="done"),
            "done": end(),
        },
    )
    # When it runs
    run.start(zero=0)
    # Then the fallback ran and saw which node failed and why
    assert run.path[:2] == ["risky", "fix"]
    assert run.shared["said"].startswith("risky: ")
    assert "division by zero" in run.shared["said"]
    assert run.state["error"]["node_id"] == "risky"


def test_the_procedures_on_failure_takes_a_failure_no_handler_catches() -> None:
    run = run_from(
        "risky",
        {
            "risky": _failing(next_node="done"),
            "done": end(),
            "alert": seq(setv("alerted", "{{error.node_id}}"), next_node="failed"),
            "failed": end(status="failed"),
        },
        global_config={"on_failure": "alert"},
    )
    run.start(zero=0)
    assert run.shared["alerted"] == "risky"
    assert run.state["status"] == "failed"


def test_recovery_steps_run_after_the_last_attempt_before_the_node_fails() -> None:
    # Given a failing node, retried once, whose handler records a recovery
    run = run_from(
        "risky",
        {
            "risky": _failing(
                next_node="done",
                error_handlers=[
                    {"error_type": "*", "action": "retry", "max_retries": 1, "delay_ms": 0},
                    {
                        "error_type": "*",
                        "recovery_steps": [{"action": "log", "message": "cleaning up"}],
                        "fallback_node": "done",
                    },
                ],
            ),
            "done": end(),
        },
    )
    # When it runs
    run.start(zero=0)
    # Then it was tried twice, and the recovery ran once, after the last attempt
    calls = [c[1] for c in run.calls() if c[0] == "risky"]
    assert calls == ["calculate", "calculate", "log"]


def test_a_failing_validation_of_a_sequence_fails_the_node() -> None:
    run = run_from(
        "s",
        {
            "s": seq(
                setv("n", 3),
                validations=[
                    {"id": "big", "condition": "{{n}} > 5", "on_failure": "fail_workflow"}
                ],
                next_node="done",
            ),
            "done": end(),
            "failed": end(status="failed"),
        },
        global_config={"on_failure": "failed"},
    )
    run.start()
    assert run.state["error"]["type"] == "VerificationFailedError"
    assert run.state["status"] == "failed"
