"""Depth and number hygiene at every door (issue 35 item 1), on fakes.

One maximum nesting depth (``MAX_JSON_DEPTH``, 64) and strict JSON — no NaN or Infinity, no
number that reads as Infinity (``1e999``), no lone surrogate — at every door that takes JSON:
a signed webhook, a run's input (``runs start``, the console's form, a schedule's or an S3
trigger's input), an approver's edits, a fork's values, a file read as JSON, an ``http``
step's response, a model's answer. Before, JSON 200-255 levels deep was accepted and its run
record could not be read back (``runs list`` failed for the whole stack); deeper gave a 500,
a lone surrogate gave a 500, and NaN, Infinity and 1e999 were stored as null.
"""

from __future__ import annotations

import argparse
import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from langorch.app.definitions import register_workflow
from langorch.app.runs import StartRun, launch_run
from langorch.app.triggers import handle_s3_object
from langorch.domain.errors import (
    DefinitionError,
    FileContentError,
    InputValidationError,
    JsonShapeError,
)
from langorch.domain.fileformats import parse_content
from langorch.domain.limits import check_json_shape
from langorch.domain.loading import load_text
from langorch.domain.runs import RunRecord, RunStatus, fitted_record
from langorch.domain.triggers import S3ObjectCreated
from tests.fakes import Fakes
from tests.integration.triggers_support import signed
from tests.support.definitions import workflow
from tests.support.records import a_run
from tests.unit.approvals_support import ALICE, FakeStack, open_and_decide
from tests.unit.triggers_support import all_runs, executions, make_deps, webhook_answer

DEPTH = 250
"""Past pydantic's reader (about 200 levels), where the records broke."""


def deep(levels: int) -> Any:
    """A value nested ``levels`` deep: ``{"a": {"b": [[…[]…]]}}``."""
    value: Any = []
    for _ in range(levels - 3):
        value = [value]
    return {"a": {"b": value}}


def deep_text(levels: int) -> str:
    """:func:`deep` as JSON text, built without ``json.dumps`` (whose recursion it may pass)."""
    return '{"a": {"b": ' + "[" * (levels - 2) + "]" * (levels - 2) + "}}"


STRICT = [
    pytest.param('{"a": NaN}', "input.a", "NaN", id="NaN"),
    pytest.param('{"a": Infinity}', "input.a", "Infinity", id="Infinity"),
    pytest.param('{"a": [1, -Infinity]}', "input.a[1]", "-Infinity", id="-Infinity"),
    pytest.param('{"a": 1e999}', "input.a", "Infinity", id="1e999"),
    pytest.param('{"a": "\\ud800"}', "input.a", "lone surrogate", id="lone-surrogate"),
]


@pytest.fixture
def deps() -> Fakes:
    return make_deps()


# --- webhooks -------------------------------------------------------------------------------


def test_a_webhook_nested_250_deep_is_refused_with_its_path_and_the_limit(deps: Fakes) -> None:
    # Given a signed delivery nested 250 levels deep (before: 202, then `runs list` failed)
    request = signed(deep_text(DEPTH), delivery="dlv-deep")

    # When it arrives
    status, answer = webhook_answer(request, deps)

    # Then a 422 names the path and the limit, and nothing started; listing runs still works
    assert status == 422
    problem = answer["problems"][0]
    assert problem["path"] == "body.a.b[0][0]…"
    assert problem["message"] == f"is nested {DEPTH} levels deep, more than 64"
    assert "flatten" in problem["hint"]
    assert all_runs(deps) == [] and executions(deps) == []


def test_a_webhook_nested_far_past_the_parser_is_a_422_not_a_500(deps: Fakes) -> None:
    # Given a signed delivery nested 5,000 levels deep (before: a 500, on every retry too)
    request = signed("[" * 5000 + "]" * 5000, delivery="dlv-deeper")

    # When it arrives
    status, answer = webhook_answer(request, deps)

    # Then it is refused as too deep, and nothing started
    assert status == 422
    assert "more than 64 levels" in answer["error"]
    assert all_runs(deps) == []


@pytest.mark.parametrize(("text", "path", "what"), STRICT)
def test_a_webhook_that_is_not_strict_json_is_refused_with_the_field(
    deps: Fakes, text: str, path: str, what: str
) -> None:
    # Given a signed delivery holding NaN, an infinity or a lone surrogate (before: stored as
    # null, or a 500)
    request = signed(text.replace('"a"', '"amount": 1, "a"'), delivery=f"dlv-{what}")

    # When it arrives
    status, answer = webhook_answer(request, deps)

    # Then a 422 names the field (under body) and what is wrong, and nothing started
    assert status == 422
    problem = answer["problems"][0]
    assert problem["path"] == path.replace("input", "body")
    assert what in problem["message"]
    assert all_runs(deps) == []


def test_64_levels_are_accepted_and_65_refused() -> None:
    # Given values nested exactly at the limit and one level past it
    # When they are checked, Then the first passes and the second names the limit
    check_json_shape(deep(64), "input")
    with pytest.raises(JsonShapeError, match=r"^input\.a\.b\[0\]\[0\]…: is nested 65 levels"):
        check_json_shape(deep(65), "input")


# --- run inputs: runs start, the console, schedules, S3 ---------------------------------------


def test_a_run_input_nested_250_deep_is_refused_with_its_path(deps: Fakes) -> None:
    # Given an input nested 250 levels deep (`runs start --input` and the console come here)
    data = {"amount": 1, **deep(DEPTH)}

    # When a run of it is started
    with pytest.raises(InputValidationError) as refused:
        launch_run(StartRun("invoices", input=data), deps)

    # Then it is refused naming the path and the limit; nothing exists, and listing works
    assert str(refused.value) == (
        f"input.a.b[0][0]…: is nested {DEPTH} levels deep, more than 64 "
        "(hint: flatten it: at most 64 levels of objects and lists)"
    )
    assert all_runs(deps) == [] and executions(deps) == []


@pytest.mark.parametrize(
    "value",
    [float("nan"), float("inf"), float("-inf"), "\ud800"],
    ids=["NaN", "Infinity", "-Infinity", "lone-surrogate"],
)
def test_a_run_input_that_is_not_strict_json_is_refused(deps: Fakes, value: Any) -> None:
    # Given an input holding NaN, an infinity or a lone surrogate (before: stored as null, or
    # a crash when the record was encoded)
    data = {"amount": 1, "note": "x", "extra": {"v": value}}

    # When a run of it is started, Then it is refused at input.extra.v and nothing exists
    with pytest.raises(InputValidationError) as refused:
        launch_run(StartRun("invoices", input=data), deps)
    assert refused.value.problems[0].path == "input.extra.v"
    assert all_runs(deps) == []


def test_runs_start_input_nested_250_deep_is_a_one_line_usage_error() -> None:
    from langorch.cli.commands._start_input import read_input
    from langorch.cli.errors import UsageError

    # Given `runs start --input` with JSON nested 250 levels deep
    args = argparse.Namespace(input=deep_text(DEPTH), input_file=None)

    # When the command reads it, Then it exits with one line naming the flag's path
    with pytest.raises(UsageError) as refused:
        read_input(args)
    assert str(refused.value).startswith(f"--input.a.b[0][0]…: is nested {DEPTH} levels deep")
    assert "\n" not in str(refused.value)


@pytest.mark.parametrize(("text", "path", "what"), STRICT)
def test_runs_start_input_that_is_not_strict_json_is_a_usage_error(
    text: str, path: str, what: str
) -> None:
    from langorch.cli.commands._start_input import read_input
    from langorch.cli.errors import UsageError

    with pytest.raises(UsageError) as refused:
        read_input(argparse.Namespace(input=text, input_file=None))
    assert str(refused.value).startswith(path.replace("input", "--input"))
    assert what in str(refused.value)


def test_the_consoles_start_form_refuses_json_nested_too_deep_with_its_path() -> None:
    from langorch.console.actions import ConsoleActionError, start_input

    # Given the console's free-form input field, nested 5,000 levels deep (before: a 500)
    form = {"input": ['{"x": ' + "[" * 5000 + "]" * 5000 + "}"]}

    # When the form is read, Then it is refused, naming the field
    with pytest.raises(ConsoleActionError, match=r"^input: is nested so deep"):
        start_input([], form)


def test_a_schedule_input_nested_250_deep_is_refused_when_the_workflow_is_put() -> None:
    # Given a workflow whose schedule trigger's input is nested 250 levels deep
    text = json.dumps(
        {
            "plan_id": "nightly",
            "triggers": [
                {"type": "schedule", "schedule": {"cron_expression": "0 17 * * 1-5"}, "input": {}}
            ],
            "steps": [{"step_id": "noop", "kind": "transform", "transform": {"x": "1"}}],
        }
    ).replace('"input": {}', '"input": ' + deep_text(DEPTH))

    # When it is loaded (`workflows put`), Then it is refused whole with the path
    with pytest.raises(DefinitionError) as refused:
        load_text(text, source="nightly.json")
    assert [p.path for p in refused.value.problems] == ["triggers[0].input.a…"]
    assert f"is nested {DEPTH + 3} levels deep" in refused.value.problems[0].message


def test_an_s3_trigger_with_an_input_not_strict_json_starts_nothing(deps: Fakes) -> None:
    # Given an s3 trigger whose stored input holds NaN (stored before the loader refused it)
    plan = load_text(
        workflow(
            "drop", triggers=[{"type": "s3", "prefix": "in/", "input": {"limit": 1}}]
        ).steps("""
      - {step_id: noop, kind: transform, transform: {x: "1"}}
"""),
        source="drop.yaml",
        fmt="yaml",
    ).workflows[0]
    plan.triggers[0].input["limit"] = float("nan")
    register_workflow(deps.definitions, plan)

    # When an object lands, Then no run starts and the skip names the field
    outcome = handle_s3_object(
        S3ObjectCreated.from_notified(deps.settings.bucket, "in/a.json", etag="e1"), deps
    )
    assert outcome.started == []
    assert "input.limit: is NaN" in outcome.skipped[0][1]


# --- approver edits ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("typed", "problem"),
    [
        pytest.param(deep_text(DEPTH), f"is nested {DEPTH} levels deep", id="depth-250"),
        pytest.param("[" * 5000 + "]" * 5000, "is nested so deep", id="depth-5000"),
        pytest.param('{"city": NaN}', "is NaN", id="NaN"),
        pytest.param('{"city": 1e999}', "is Infinity", id="1e999"),
        pytest.param('{"city": "\\ud800"}', "holds a lone surrogate", id="lone-surrogate"),
    ],
)
def test_an_approvers_json_edit_too_deep_or_not_strict_is_refused_and_nothing_is_written(
    typed: str, problem: str
) -> None:
    from functions.approval_callback import handler

    # Given an approval with an editable JSON field
    stack = FakeStack()
    previous = handler.container.use(stack.container)
    try:
        parked = stack.park(editable={"address": {"city": "Oslo"}})

        # When the approver posts an edit nested too deep, or not strict JSON
        _, answer = open_and_decide(
            handler, parked.links[ALICE], "approved", **{"edit.address": typed}
        )
    finally:
        handler.container.use(previous)

    # Then the form comes back with a 422 naming the field, and nothing was decided or sent
    assert answer["statusCode"] == 422
    assert f"The field address {problem}" in answer["body"]
    approval = stack.container.approvals.get(parked.approval_id)
    assert approval is not None and approval.is_pending and approval.edits == {}
    assert stack.steps.sent == []


# --- fork values ------------------------------------------------------------------------------


def test_a_fork_set_value_nested_250_deep_is_a_one_line_usage_error() -> None:
    from langorch.cli.commands._start_input import parse_edits
    from langorch.cli.errors import UsageError

    # Given `runs fork --set` with a value nested 250 levels deep (before: the fork was made)
    pairs = [f"address={deep_text(DEPTH)}"]

    # When the command reads it, Then one line names the flag, the key's path and the limit
    with pytest.raises(UsageError) as refused:
        parse_edits(pairs, "--set")
    assert str(refused.value).startswith(
        f"--set address.a.b[0][0]…: is nested {DEPTH} levels deep, more than 64"
    )


@pytest.mark.parametrize("raw", ["NaN", "Infinity", "1e999", '"\\ud800"'])
def test_a_fork_set_value_that_is_not_strict_json_is_a_usage_error(raw: str) -> None:
    from langorch.cli.commands._start_input import parse_edits
    from langorch.cli.errors import UsageError

    with pytest.raises(UsageError, match=r"^--set amount: "):
        parse_edits([f"amount={raw}"], "--set")


# --- model answers ---------------------------------------------------------------------------


def _request() -> Any:
    from langorch.llm.base import LLMRequest

    return LLMRequest(
        run_id="run-1",
        step_id="extract",
        block_id=None,
        provider="offline",
        model=None,
        system_prompt="",
        prompt="",
        output_keys=["data"],
        output_types={"data": "object"},
    )


@pytest.mark.parametrize(
    ("answer", "problem"),
    [
        pytest.param({"data": deep(DEPTH)}, f"is nested {DEPTH + 1} levels deep", id="depth"),
        pytest.param({"data": json.dumps(deep(DEPTH))}, "is nested", id="depth-as-text"),
        pytest.param({"data": {"x": float("nan")}}, "answer.data.x: is NaN", id="NaN"),
        pytest.param({"data": {"x": float("inf")}}, "answer.data.x: is Infinity", id="inf"),
        pytest.param({"data": {"x": "\udfff"}}, "lone surrogate", id="lone-surrogate"),
    ],
)
def test_a_model_answer_too_deep_or_not_strict_is_a_retryable_step_error(
    answer: dict[str, Any], problem: str
) -> None:
    from langorch.llm.base import LLMCallError
    from langorch.llm.schema import validate_outputs

    # Given a structured answer nested too deep or not strict JSON (a provider's SDK parses
    # NaN and any depth; before, it joined the run's state)
    # When it is checked against the block, Then it is the step's error, worth another attempt
    with pytest.raises(LLMCallError) as refused:
        validate_outputs(_request(), answer)
    assert problem in str(refused.value)
    assert refused.value.retryable is True


def test_a_json_mode_answer_with_nan_is_malformed_output() -> None:
    from langorch.llm._langchain import parse_json_object
    from langorch.llm.errors import MalformedOutputError

    # Given a JSON-mode answer holding NaN, When it is parsed, Then it is malformed output
    with pytest.raises(MalformedOutputError, match=r"answer\.data: is NaN"):
        parse_json_object('{"data": NaN}', _request(), "offline", (1, 1))


# --- files read as JSON, records written --------------------------------------------------------


@pytest.mark.parametrize(
    ("data", "fmt", "problem"),
    [
        pytest.param(deep_text(DEPTH).encode(), "json", f"nested {DEPTH} levels", id="json-250"),
        pytest.param(b"[" * 5000 + b"]" * 5000, "json", "so deep", id="json-5000"),
        pytest.param(b'{"a": NaN}', "json", "content.a: is NaN", id="json-NaN"),
        pytest.param(b'{"a": 1e999}', "json", "content.a: is Infinity", id="json-1e999"),
        pytest.param(b'{"a": "\\udc00"}', "json", "lone surrogate", id="json-surrogate"),
        pytest.param(b"a: .nan\n", "yaml", "content.a: is NaN", id="yaml-NaN"),
        pytest.param(b"&a [*a]\n", "yaml", "at least 1000 levels", id="yaml-self-alias"),
    ],
)
def test_a_file_too_deep_or_not_strict_is_a_content_error_naming_the_path(
    data: bytes, fmt: str, problem: str
) -> None:
    # Given a file read as JSON or YAML that is nested too deep or not strict (before: read
    # into the run's state, or a RecursionError that was retried)
    # When it is parsed, Then it is the read_file step's content error, saying where
    with pytest.raises(FileContentError) as refused:
        parse_content(data, fmt, "s3://files/in/deep.json")
    assert problem in str(refused.value)
    assert refused.value.retryable is False


def test_outputs_nested_too_deep_are_summarised_so_the_record_reads_back() -> None:
    # Given a run whose outputs a transform nested 250 levels deep (no door would take them)
    now = datetime.now(UTC)
    run = a_run(
        workflow_id="w", at=now, status=RunStatus.succeeded, outputs={"tree": deep(DEPTH), "n": 1}
    )

    # When the record is fitted for storing
    fitted = fitted_record(run, 190_000)

    # Then its outputs are a summary (the checkpoint keeps them whole) and it reads back
    assert fitted.outputs_truncated is True
    assert RunRecord.model_validate_json(fitted.model_dump_json()).outputs["n"] == "1"


# --- fuzzing the doors: depth, surrogates, non-finite numbers ---------------------------------

LEAVES = ["1", '"x"', "null", "NaN", "Infinity", "-Infinity", "1e999", "-1e999", "1e308"]
ESCAPES = ['"\\ud800"', '"\\udc00"', '"a\\ud83d"', '"\\ud83d\\ude00"', '"\\u00e9"']


@st.composite
def hostile_json(draw: st.DrawFn) -> str:
    """JSON-ish text: nesting from shallow to far past every parser, around a leaf that is a
    plain value, a non-finite number, or a string with a lone or paired surrogate escape."""
    depth = draw(st.one_of(st.integers(0, 70), st.integers(190, 260), st.integers(900, 3000)))
    leaf = draw(st.sampled_from(LEAVES + ESCAPES))
    # One bit per level picks an object or an array: one draw, where a list of up to 3,000
    # drawn elements cost ~3.7 s of CPU per test in generation alone.
    kinds = draw(st.integers(0, 2**depth - 1))
    opens = ['{"k": ' if kinds >> level & 1 else "[" for level in range(depth)]
    closes = "".join("}" if part.startswith("{") else "]" for part in reversed(opens))
    return "".join(opens) + leaf + closes


FUZZ = settings(max_examples=80, deadline=None, derandomize=True)


@FUZZ
@given(text=hostile_json())
def test_what_the_door_parser_accepts_the_record_parser_reads_back_unchanged(text: str) -> None:
    import pydantic_core

    from langorch.domain.errors import JsonInputError
    from langorch.domain.limits import loads_strict

    # Given any text, When a door parses it
    try:
        value = loads_strict(text, "input")
    except JsonInputError:
        return  # refused with a named, 4xx-able error: never anything else
    # Then the records' writer and reader (pydantic) carry it unchanged
    assert pydantic_core.from_json(pydantic_core.to_json(value)) == value


@FUZZ
@given(text=hostile_json())
def test_no_signed_webhook_body_gets_anything_but_its_answer(text: str) -> None:
    # Given a signed delivery whose body is nested anywhere from 0 to 3,000 levels and holds
    # NaN, an infinity or a surrogate escape
    deps = make_deps()
    body = '{"amount": 1, "x": ' + text + "}"

    # When it arrives
    status, answer = webhook_answer(signed(body, delivery="dlv-fuzz"), deps)

    # Then it is accepted (and its record reads back) or refused with a 4xx that says why
    assert status in (202, 415, 422), answer
    if status == 202:
        assert deps.runs.get_run(answer["run_id"]).status is RunStatus.queued
    else:
        assert answer["error"] and all_runs(deps) == []


@FUZZ
@given(text=hostile_json())
def test_no_json_edit_gets_anything_but_a_value_or_a_named_refusal(text: str) -> None:
    from langorch.domain.approvals.edits import EditRejectedError, parse_edits

    # Given an approver's JSON edit nested anywhere and holding anything
    # When it is read, Then it is a value within the limits, or refused naming the field
    try:
        edits = parse_edits({"data": {"k": 1}}, {"edit.data": '{"k": ' + text + "}"})
    except EditRejectedError as exc:
        assert exc.key == "data"
        return
    assert check_json_shape(edits, "edits") is None


def test_a_timeline_event_with_tool_arguments_nested_too_deep_reads_back() -> None:
    from langorch.domain.runs import TimelineEvent, TimelineEventType

    # Given a tool call whose arguments a model nested 250 levels deep (under 1,000 characters,
    # so not summarised for size)
    event = TimelineEvent(
        seq=1,
        at=datetime.now(UTC),
        type=TimelineEventType.tool_called,
        detail={"tool": "search", "args": deep(DEPTH)},
    )

    # When it is stored and read back, Then it reads (its detail summarised, not kept deep)
    again = TimelineEvent.model_validate_json(event.model_dump_json())
    assert again.detail["tool"] == "search"


@pytest.mark.parametrize(
    ("body", "said"),
    [("[" * 5000 + "]" * 5000, "64 levels"), ('{"a": NaN}', "--input.a: is NaN")],
)
def test_hooks_send_refuses_what_the_webhook_door_would_before_sending(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], body: str, said: str
) -> None:
    # Given a body the webhook door refuses (too deep, not strict JSON)
    from langorch.cli.main import main

    # When `hooks send` is asked to sign and send it
    code = main(["hooks", "send", "w", "--input", body, "--home", str(tmp_path)])
    # Then it refuses at once, exit 2, with the path and the limit
    assert code == 2
    assert said in capsys.readouterr().err
