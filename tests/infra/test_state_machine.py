"""The deployed state machine is the ASL file local mode runs; logs carry no execution data."""

from __future__ import annotations

import json
from importlib import resources
from typing import Any

from tests.infra.conftest import Synth
from tests.infra.helpers import ref_target


def _asl_text() -> str:
    """The ASL file the stack deploys (``infra.constructs.workflow.ASL_FILE``)."""
    # Imported here, not at the top: infra.constructs loads aws-cdk-lib (a Node process, ~9 s of
    # CPU) that collecting this file on a worker that runs no infra test would pay.
    from infra.constructs.workflow import ASL_FILE

    return ASL_FILE.read_text(encoding="utf-8")


def _local_asl() -> dict[str, Any]:
    # What `langorch dev` loads: the package resource, not a copy.
    text = (resources.files("langorch") / "statemachine.asl.json").read_text(encoding="utf-8")
    return json.loads(text)


def _machine(synth: Synth) -> dict[str, Any]:
    machines = synth.of_type("AWS::StepFunctions::StateMachine")
    assert len(machines) == 1
    return next(iter(machines.values()))["Properties"]


def _definition_text(definition: Any, tokens: dict[str, str]) -> str:
    """The DefinitionString as text: a plain string, or a Fn::Join/Fn::Sub with tokens."""
    if isinstance(definition, str):
        return definition
    if "Fn::Join" in definition:
        separator, parts = definition["Fn::Join"]
        return separator.join(
            p if isinstance(p, str) else tokens[ref_target(p) or ""] for p in parts
        )
    if "Fn::Sub" in definition:
        body = definition["Fn::Sub"]
        return body if isinstance(body, str) else body[0]
    raise AssertionError(f"unexpected DefinitionString {definition!r}")


def _resolved(synth: Synth) -> dict[str, Any]:
    """The definition with each substitution put back as the ``${Name}`` the file uses."""
    machine = _machine(synth)
    substitutions = machine.get("DefinitionSubstitutions", {})
    tokens = {ref_target(v) or "": f"${{{k}}}" for k, v in substitutions.items()}
    tokens["AWS::Partition"] = "${Partition}"  # an environment-agnostic stack
    text = _definition_text(machine["DefinitionString"], tokens)
    # The stack's partition, written at synthesis, back to the file's variable.
    text = text.replace(f'"arn:{synth.stack.partition}:states:::', '"arn:${Partition}:states:::')
    return json.loads(text)


def _transitions(definition: dict[str, Any]) -> set[tuple[str, str, str]]:
    edges = set()
    for name, state in definition["States"].items():
        if "Next" in state:
            edges.add((name, "Next", state["Next"]))
        if "Default" in state:
            edges.add((name, "Default", state["Default"]))
        for choice in state.get("Choices", []):
            edges.add((name, json.dumps(choice, sort_keys=True), choice["Next"]))
        for catch in state.get("Catch", []):
            edges.add((name, ",".join(catch["ErrorEquals"]), catch["Next"]))
    return edges


def test_deployed_definition_is_the_asl_file_local_mode_runs(synth: Synth) -> None:
    # Given the file `langorch dev` executes and the template CDK deploys
    local = _local_asl()
    assert json.loads(_asl_text()) == local  # CDK reads that file
    deployed = _resolved(synth)
    # Then they have the same start, states and transitions...
    assert deployed["StartAt"] == local["StartAt"]
    assert set(deployed["States"]) == set(local["States"])
    assert _transitions(deployed) == _transitions(local)
    # ...and are in fact identical, retries, timeouts and parameters included.
    assert deployed == local


def test_substitutions_point_at_the_runner_alias_and_request_approval(synth: Synth) -> None:
    substitutions = _machine(synth)["DefinitionSubstitutions"]
    functions = synth.stack.functions
    assert set(substitutions) == {"RunSegmentFunctionArn", "RequestApprovalFunctionArn"}
    assert ref_target(substitutions["RunSegmentFunctionArn"]) == synth.logical_id(
        functions.runner_alias
    )
    assert ref_target(substitutions["RequestApprovalFunctionArn"]) == synth.logical_id(
        functions.request_approval
    )
    # Every ${...} in the file is substituted: none reaches Step Functions unresolved.
    text = _asl_text()
    for name in substitutions:
        assert f"${{{name}}}" in text


def test_task_resources_name_the_stacks_partition(synth: Synth) -> None:
    # Given the definition as deployed
    machine = _machine(synth)
    definition = machine["DefinitionString"]
    text = definition if isinstance(definition, str) else json.dumps(definition)
    # Then no task resource assumes the aws partition by a literal the file wrote: the file
    # says ${Partition} and the stack (in eu-west-1) fills in its own
    assert "${Partition}" not in text
    assert text.count('"arn:aws:states:::lambda:invoke') == 5  # the five Task states
    file_text = _asl_text()
    assert "arn:aws:" not in file_text
    assert file_text.count("arn:${Partition}:states:::") == 5


def test_logging_excludes_execution_data_and_tracing_is_on(synth: Synth) -> None:
    machine = _machine(synth)
    assert machine["StateMachineType"] == "STANDARD"
    assert machine["LoggingConfiguration"]["IncludeExecutionData"] is False
    assert machine["LoggingConfiguration"]["Level"] == "ALL"
    assert machine["TracingConfiguration"] == {"Enabled": True}


def test_state_machine_may_invoke_exactly_its_two_functions(synth: Synth) -> None:
    from tests.infra.helpers import actions_on, role_statements

    role = ref_target(_machine(synth)["RoleArn"]) or ""
    allowed = actions_on(role_statements(synth.resources, role))
    functions = synth.stack.functions
    assert allowed["lambda:InvokeFunction"] == {
        f"<{synth.logical_id(functions.runner_alias)}>",
        f"<{synth.logical_id(functions.request_approval)}.Arn>",
        f"<{synth.logical_id(functions.request_approval)}.Arn>:*",
    }


def test_a_paused_run_parks_on_a_task_token_the_runner_keeps_and_a_resume_wakes(
    synth: Synth,
) -> None:
    # Given the deployed definition
    states = _resolved(synth)["States"]
    # Then a segment that answers "paused" parks on a task token (no Lambda held) ...
    paused = [c for c in states["Route"]["Choices"] if c["StringEquals"] == "paused"]
    assert [c["Next"] for c in paused] == ["AwaitResume"]
    await_resume = states["AwaitResume"]
    assert await_resume["Resource"].endswith(":states:::lambda:invoke.waitForTaskToken")
    assert await_resume["Parameters"]["FunctionName"] == "${RunSegmentFunctionArn}"
    assert await_resume["Parameters"]["Payload"] == {
        "action": "park_paused",
        "run_id.$": "$.run_id",
        "task_token.$": "$$.Task.Token",
    }
    # ... which a resume (or its look-again timeout) turns into the next segment
    assert await_resume["TimeoutSecondsPath"] == "$.seconds"
    assert await_resume["Next"] == "Resumed"
    timeout = [c for c in await_resume["Catch"] if c["ErrorEquals"] == ["States.Timeout"]]
    assert [c["Next"] for c in timeout] == ["Resumed"]
    assert states["Resumed"]["Next"] == "RunSegment"
    assert states["Resumed"]["Parameters"] == {
        "run_id.$": "$.run_id",
        "resume": None,
        "events.$": "$.events",  # the history count goes on (continue-as-new)
    }
