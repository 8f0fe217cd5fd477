"""``model_limits`` (issue 33): the shape a platform team writes, the problems it is told, which
limits a call is held to, and the runs that wait for them on fakes (no clock, no network)."""

from __future__ import annotations

import time

import pydantic
import pytest

from langorch.app.resources import ParkForResource, WakingLocks, park_for_resource
from langorch.app.runs import RunSegment, StartRun, run_segment, start_run
from langorch.cli.timeline import event_line
from langorch.config import Settings
from langorch.domain.errors import DefinitionError
from langorch.domain.model_limits import (
    RATE_PREFIX,
    ModelLimits,
    Rate,
    describe_wait,
    resource_name,
)
from langorch.domain.resources import RESOURCE_NAME
from langorch.domain.runs import TimelineEventType
from langorch.local.terminal import timeline_line
from tests.fakes import Fakes
from tests.integration.conftest import register_text

SONNET = "anthropic.claude-3-5-sonnet-20240620-v1:0"
EXAMPLE = {
    "bedrock:anthropic.claude-3-5-sonnet*": {"concurrency": 4, "rate": "60/1m"},
    "bedrock:anthropic.*": {"concurrency": 10},
    "openai:*": {"concurrency": 8},
    "openai": {"concurrency": 20},
}


def problems_of(raw: object) -> list[str]:
    with pytest.raises(DefinitionError) as caught:
        ModelLimits.parse(raw, providers={"bedrock", "openai", "anthropic", "offline"})  # type: ignore[arg-type]
    return [str(p) for p in caught.value.problems]


# --- the shape ------------------------------------------------------------------------------


def test_a_model_pattern_limits_each_model_it_matches_with_its_own_slots() -> None:
    # Given the example limits
    limits = ModelLimits.parse(EXAMPLE)
    # When a call to Sonnet on Bedrock asks which limits hold it
    slots = limits.slots("bedrock", SONNET)
    # Then one: the model's own resource, with the longest matching pattern's limits
    assert [(s.name, s.concurrency, s.rate) for s in slots] == [
        (f"model:bedrock:{SONNET}", 4, Rate(60, 60.0, "60/1m"))
    ]
    assert slots[0].label == f"bedrock:{SONNET}"


def test_a_shorter_pattern_applies_where_no_longer_one_matches() -> None:
    # Given the example limits, when a call goes to another Anthropic model on Bedrock
    slots = ModelLimits.parse(EXAMPLE).slots("bedrock", "anthropic.claude-3-haiku")
    # Then it holds a slot of that model under the shorter pattern's limit
    assert [(s.name, s.concurrency, s.rate) for s in slots] == [
        ("model:bedrock:anthropic.claude-3-haiku", 10, None)
    ]


def test_a_bare_provider_limits_all_its_calls_together_beside_the_models_own_limit() -> None:
    # Given per-model and provider-wide limits for openai
    slots = ModelLimits.parse(EXAMPLE).slots("openai", "gpt-4o")
    # Then a call holds both, taken in one order (by name) so no two calls deadlock
    assert [(s.name, s.concurrency) for s in slots] == [
        ("model:openai", 20),
        ("model:openai:gpt-4o", 8),
    ]


def test_a_model_no_key_names_is_not_limited() -> None:
    assert ModelLimits.parse(EXAMPLE).slots("anthropic", "claude-haiku-4-5") == []
    assert ModelLimits.parse(EXAMPLE).slots("bedrock", "meta.llama3") == []


@pytest.mark.parametrize(
    ("text", "calls", "period"),
    [("60/1m", 60, 60.0), ("5/s", 5, 1.0), ("100 / 10s", 100, 10.0), ("1000/1h", 1000, 3600.0)],
)
def test_a_rate_is_calls_per_period(text: str, calls: int, period: float) -> None:
    limits = ModelLimits.parse({"openai": {"rate": text}})
    rate = limits.slots("openai", "gpt-4o")[0].rate
    assert rate is not None and (rate.calls, rate.period) == (calls, period)


def test_a_rates_reservations_live_in_a_resource_of_their_own() -> None:
    slot = ModelLimits.parse(EXAMPLE).slots("bedrock", SONNET)[0]
    assert slot.rate_name == f"{RATE_PREFIX}bedrock:{SONNET}"


def test_a_model_id_too_long_for_a_resource_name_is_named_by_its_digest() -> None:
    # Given an inference profile ARN longer than a resource name may be
    arn = "arn:aws:bedrock:us-east-1:123456789012:application-inference-profile/" + "x" * 80
    # Then its resource is a valid name, the same for the same ARN
    name = resource_name(f"bedrock:{arn}")
    assert RESOURCE_NAME.match(name) and name == resource_name(f"bedrock:{arn}")
    assert name != resource_name(f"bedrock:{arn}y")


# --- the problems ---------------------------------------------------------------------------


def test_every_problem_is_told_at_once_with_its_path_the_limit_and_the_fix() -> None:
    problems = problems_of(
        {
            "gemini:pro": {"concurrency": 2},
            "bedrock:anthropic.*": {"concurrency": 0, "burst": 3},
            "openai:*": {"rate": "6000/1m"},
            "openai": {"rate": "5 per minute"},
            "Bad Key": {"concurrency": 1},
            "anthropic": {},
        }
    )
    assert problems == [
        "model_limits['gemini:pro']: unknown provider 'gemini' (hint: one of anthropic, "
        "bedrock, offline, openai)",
        "model_limits['bedrock:anthropic.*'].burst: unknown field(s) burst (hint: a model's "
        "limits are 'concurrency' and 'rate')",
        "model_limits['bedrock:anthropic.*'].concurrency: must be a whole number from 1 to "
        "1000, not 0 (hint: the calls of one model that may be in flight at once, e.g. 4)",
        "model_limits['openai:*'].rate: 6000 calls per period: a rate admits 1 to 1000 (hint: "
        'the same pace over a shorter period, e.g. "100/1s")',
        "model_limits['openai'].rate: '5 per minute' is not a rate (hint: write calls/period "
        'with a unit of s, m, h or d, e.g. "60/1m" or "5/s")',
        "model_limits['Bad Key']: 'Bad Key' is not a provider or provider:model key (hint: "
        "write 'bedrock:anthropic.claude-3-5-sonnet*' (one model or a pattern with * and ?) "
        "or 'openai' (all of a provider's calls together))",
        "model_limits['anthropic']: sets no limit (hint: give \"concurrency\": N and/or "
        '"rate": "N/1m")',
    ]


@pytest.mark.parametrize(
    ("limit", "told"),
    [
        ({"concurrency": True}, "must be a whole number from 1 to 1000, not True"),
        ({"concurrency": 1001}, "not 1001"),
        ({"rate": "0/1m"}, "0 calls per period"),
        ({"rate": "10/2d"}, "the period of '10/2d' must be 1s to 1d"),
        ({"rate": 60}, "60 is not a rate"),
        (4, "must be an object, not 4"),
    ],
)
def test_a_limit_out_of_its_range_is_refused(limit: object, told: str) -> None:
    assert told in problems_of({"openai:*": limit})[0]


def test_the_setting_must_be_an_object() -> None:
    assert problems_of(["openai"])[0].startswith("model_limits: must be an object, not list")


def test_settings_refuse_bad_limits_naming_the_variable_and_the_key(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Given LANGORCH_MODEL_LIMITS with a concurrency of 0
    monkeypatch.setenv("LANGORCH_MODEL_LIMITS", '{"openai:*": {"concurrency": 0}}')
    # When the settings are read, then the error names the key, the limit and the variable
    with pytest.raises(pydantic.ValidationError) as caught:
        Settings()
    message = str(caught.value)
    assert "model_limits['openai:*'].concurrency: must be a whole number from 1 to 1000" in message
    assert "LANGORCH_MODEL_LIMITS" in message


def test_settings_read_the_limits_as_json(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LANGORCH_MODEL_LIMITS", '{"openai": {"concurrency": 8, "rate": "5/s"}}')
    assert Settings().model_limits == {"openai": {"concurrency": 8, "rate": "5/s"}}


# --- how a wait is told ---------------------------------------------------------------------


def test_a_wait_is_told_as_what_it_waits_for() -> None:
    assert (
        describe_wait(f"model:bedrock:{SONNET}", 2)
        == f"waits for a slot of model bedrock:{SONNET}, place 2 in line"
    )
    assert (
        describe_wait("model:openai", 1) == "waits for a slot of provider openai, place 1 in line"
    )
    assert (
        describe_wait("model:openai:gpt-4o", seconds=12)
        == "waits 12 s for the rate of model openai:gpt-4o"
    )
    assert describe_wait("browser:1", 3) == "waiting for resource browser:1 (position 3)"


# --- runs on fakes --------------------------------------------------------------------------

FLOW = """
blocks:
  - block_id: b_title
    output_keys: [title]
    prompt_template: "Write a title."
    llm_provider: offline
workflows:
  - plan_id: titles
    memory: false
    steps:
      - {step_id: title, block_id: b_title}
      - {step_id: tidy, kind: transform, transform: {done: "1"}, depends_on: [title]}
"""
SLOT = "model:offline:offline"
OTHER = "run-other/step"


def a_stack(limits: dict[str, object]) -> Fakes:
    fakes = Fakes({}, model_limits=limits)
    register_text(fakes, FLOW)  # type: ignore[arg-type]
    return fakes


def test_a_run_whose_model_is_full_parks_until_a_slot_is_given_back() -> None:
    # Given a concurrency of 1 for the offline model, its one slot held by another call
    deps = a_stack({"offline:*": {"concurrency": 1}})
    deps.resources.acquire(SLOT, OTHER, now=time.time(), lease_seconds=600, wait_seconds=600)
    run_id = start_run(StartRun("titles"), deps)[0].run_id

    # When the run reaches its LLM step
    parked = run_segment(RunSegment(run_id), deps)

    # Then it parks queued for the model's slot (no Lambda waits), first in line, and says so
    assert parked.status == "waiting_resource"
    assert parked.resource == {"name": SLOT, "holder": f"{run_id}/title"}
    [waiting] = [
        e for e in deps.runs.get_timeline(run_id) if e.type is TimelineEventType.resource_waiting
    ]
    assert "waits for a slot of model offline:offline, place 1 in line" in event_line(waiting)
    assert timeline_line(run_id, "titles", waiting) == (
        f"{run_id} (titles) waits for a slot of model offline:offline, place 1 in line at title"
    )

    # When the state machine parks it on a task token and the other call gives its slot back
    token = deps.executions.park(run_id)
    assert not park_for_resource(ParkForResource(run_id, SLOT, f"{run_id}/title", token), deps)
    WakingLocks(deps.resources, deps.executions).release(SLOT, OTHER)

    # Then its task is answered, and woken it runs to the end, giving its slot back
    assert deps.executions.describe(run_id)["status"] == "SUCCEEDED"
    done = run_segment(RunSegment(run_id, resume={"woke": True}), deps)
    assert done.status == "succeeded"
    assert deps.resources.get(SLOT).live(time.time()).leases == {}


def test_the_settings_limit_is_the_model_resources_limit() -> None:
    # Given a concurrency of 3 for the offline model
    deps = a_stack({"offline:*": {"concurrency": 3}})
    # When a run calls it
    run_id = start_run(StartRun("titles"), deps)[0].run_id
    assert run_segment(RunSegment(run_id), deps).status == "succeeded"
    # Then the model's resource is declared with that limit (`langorch resources list`)
    state = deps.resources.get(SLOT)
    assert (state.declared, state.limit) == (True, 3)


def test_a_step_that_calls_no_model_takes_no_slot() -> None:
    # Given limits on every offline model, and a run of the workflow
    deps = a_stack({"offline": {"concurrency": 1}})
    run_id = start_run(StartRun("titles"), deps)[0].run_id
    # When it runs: the LLM step takes the provider's slot, the transform none
    run_segment(RunSegment(run_id), deps)
    taken = [
        (e.step_id, e.type)
        for e in deps.runs.get_timeline(run_id)
        if e.type is TimelineEventType.resource_acquired
    ]
    assert taken == [("title", TimelineEventType.resource_acquired)]


def test_a_call_over_its_models_rate_sleeps_until_its_start_instead_of_failing() -> None:
    # Given a rate of one call a minute for the offline provider, and a run that used it
    deps = a_stack({"offline": {"rate": "1/1m"}})
    first = start_run(StartRun("titles"), deps)[0].run_id
    assert run_segment(RunSegment(first), deps).status == "succeeded"

    # When a second run reaches its LLM step within the minute
    second = start_run(StartRun("titles"), deps)[0].run_id
    slept = run_segment(RunSegment(second), deps)

    # Then it sleeps (a Step Functions Wait: no Lambda) until its reserved start, and says why
    assert slept.status == "sleeping"
    assert slept.seconds is not None and 1 <= slept.seconds <= 60
    [waiting] = [
        e for e in deps.runs.get_timeline(second) if e.type is TimelineEventType.resource_waiting
    ]
    assert waiting.detail["parked_seconds"] == slept.seconds
    assert f"waits {slept.seconds} s for the rate of provider offline" in event_line(waiting)
    assert deps.runs.get_run(second).status.value == "sleeping"


def test_a_raised_limit_lets_the_runs_in_line_in_at_once() -> None:
    # Given a run parked in line for the offline model, whose one slot another call holds
    deps = a_stack({"offline:*": {"concurrency": 1}})
    deps.resources.acquire(SLOT, OTHER, now=time.time(), lease_seconds=600, wait_seconds=600)
    run_id = start_run(StartRun("titles"), deps)[0].run_id
    assert run_segment(RunSegment(run_id), deps).status == "waiting_resource"
    token = deps.executions.park(run_id)
    park_for_resource(ParkForResource(run_id, SLOT, f"{run_id}/title", token), deps)

    # When a redeploy raises the model's concurrency to 2 and a segment first sees it
    WakingLocks(deps.resources, deps.executions).ensure_limit(SLOT, 2)

    # Then the parked run is woken without waiting for the other call to end
    assert deps.executions.describe(run_id)["status"] == "SUCCEEDED"
    assert deps.resources.get(SLOT).limit == 2


def test_a_models_resource_is_not_a_name_a_step_or_an_operator_may_take() -> None:
    from langorch.app.resources import declare_resource
    from langorch.domain.resources import check_step_resource

    # Given a step naming a model's resource, When validated, Then it is refused with the fix
    [problem] = check_step_resource("model:openai:gpt-4o", "transform", False, "steps[0]")
    assert problem.path == "steps[0].resource"
    assert "model_limits" in problem.hint
    # And `langorch resources set model:… --limit N` is refused the same way (the setting owns it)
    with pytest.raises(DefinitionError, match="a model's resource"):
        declare_resource("model:openai", 3, Fakes())  # type: ignore[arg-type]
