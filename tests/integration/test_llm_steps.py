"""LLM steps through the engine with the real SDKs: how many calls each failure costs.

A run of a real workflow (on the embedded stores: these are the engine's and the SDKs' behaviour,
not DynamoDB's; the registry built by the container from settings) asks a loopback
OpenAI-compatible server or Bedrock Converse endpoint; the server counts what it is asked. The
step owns retries: a refusal or cut-off is one call, a malformed answer is retried up to
``max_retries``, a throttled call waits the server's ``Retry-After``, a call past the step's
timeout is abandoned before the next attempt starts, and every attempt's tokens reach the
timeline.
"""

from __future__ import annotations

import time
from typing import Any

from langorch.composition.container import Container
from tests.integration.conftest import MakeContainer, register_text, run_to_end
from tests.llm_servers import FakeBedrock, FakeOpenAI
from tests.support.llm import sdks_imported

# Imported before the first timed call, by the worker that runs this file only.
_sdks = sdks_imported("langchain_aws", "langchain_openai")

FLOW = """
blocks:
  - block_id: b_draft
    output_keys: [title]
    prompt_template: "Write a title about {{topic}}"
    input_keys: [topic]
    max_retries: 2
    max_tokens: 120
    timeout_seconds: {timeout}
workflows:
  - plan_id: drafting
    memory: false
    llm_temperature: 0.2
    inputs_schema: {{properties: {{topic: {{type: string}}}}}}
    steps:
      - {{step_id: draft, block_id: b_draft, retry_backoff_seconds: 0, on_error: recover}}
      - {{step_id: recover, kind: transform, transform: {{why: "error.type"}}}}
"""


def _container(make: MakeContainer, timeout: int = 30, **settings: Any) -> Container:
    container = make(**settings)
    container.__dict__.pop("llm")  # the registry the container builds from its settings
    register_text(container, FLOW.format(timeout=timeout))
    return container


def _openai(make: MakeContainer, server: FakeOpenAI, timeout: int = 30) -> Container:
    return _container(
        make,
        timeout,
        default_llm_provider="openai",
        openai_base_url=server.base_url,
        openai_api_key="sk-test",
    )


def _slow_bedrock(make: MakeContainer, server: FakeBedrock) -> Container:
    """Bedrock answering after 30 s, for a step with a 2 s timeout (and 2 retries)."""
    server.tool_answer({"title": "late"}, delay=30)
    return _container(
        make, timeout=2, default_llm_provider="bedrock", bedrock_endpoint_url=server.url
    )


def _timeline(container: Container, run_id: str) -> list[Any]:
    return list(container.runs.get_timeline(run_id))


def _run(container: Container) -> tuple[Any, list[Any]]:
    result = run_to_end(container, "drafting", {"topic": "owls"})
    return result, _timeline(container, result.run_id)


def _tokens(events: list[Any]) -> int:
    return sum(e.tokens.input + e.tokens.output for e in events if e.tokens)


def test_a_refusal_costs_one_call_and_its_tokens_are_recorded(
    make_embedded: MakeContainer, openai_server: FakeOpenAI
) -> None:
    # Given a model that refuses, and a step allowed 2 retries
    openai_server.answer(None, refusal="No.", prompt_tokens=12, completion_tokens=3)
    container = _openai(make_embedded, openai_server)

    # When the run goes through
    result, events = _run(container)

    # Then one call was made, the error route got the named type, and the tokens are counted
    assert openai_server.calls == 1
    assert result.outputs["why"] == "ModelRefusalError"
    failed = [e for e in events if e.type.value == "step_failed"]
    assert failed[0].error.message.startswith("OpenAI refused to answer block 'b_draft'")
    assert _tokens(events) == 15


def test_a_malformed_answer_is_retried_and_every_attempt_is_counted(
    make_embedded: MakeContainer, openai_server: FakeOpenAI
) -> None:
    # Given a server answering prose every time
    openai_server.answer("Owls are great.", prompt_tokens=10, completion_tokens=5)
    container = _openai(make_embedded, openai_server)

    # When the run goes through
    result, events = _run(container)

    # Then the step made its 3 attempts (1 + max_retries 2), one request each, and all three
    # attempts' tokens reach the timeline
    assert openai_server.calls == 3
    assert result.outputs["why"] == "MalformedOutputError"
    assert [e.type.value for e in events if e.step_id == "draft"][1:] == [
        "step_retried",
        "step_retried",
        "step_failed",
    ]
    assert _tokens(events) == 45


def test_block_and_workflow_llm_settings_reach_the_request(
    make_embedded: MakeContainer, openai_server: FakeOpenAI
) -> None:
    # Given a block with max_tokens and a workflow with a temperature
    openai_server.answer({"title": "Night owls"})
    container = _openai(make_embedded, openai_server)

    # When the run goes through
    result, _ = _run(container)

    # Then both were sent and the answer came back
    body = openai_server.received[0].body
    assert (body["max_completion_tokens"], body["temperature"]) == (120, 0.2)
    assert result.status == "succeeded"


def test_throttling_waits_the_servers_retry_after_then_succeeds(
    make_embedded: MakeContainer, openai_server: FakeOpenAI
) -> None:
    # Given a 429 asking for 1 s, then an answer (the step's own backoff is 0)
    openai_server.error(429, "Rate limit reached", {"retry-after": "1"})
    openai_server.answer({"title": "Owls"})
    container = _openai(make_embedded, openai_server)

    # When the run goes through
    result, _ = _run(container)

    # Then the second call came at least the asked second after the first
    assert result.status == "succeeded"
    assert openai_server.calls == 2
    first, second = openai_server.received
    assert second.at - first.at >= 1.0


def test_a_call_past_the_step_timeout_is_abandoned_before_the_retry(
    make_embedded: MakeContainer, openai_server: FakeOpenAI
) -> None:
    # Given a server that takes 30 s, and a step with a 2 s timeout and 2 retries
    openai_server.answer({"title": "late"}, delay=30)
    container = _openai(make_embedded, openai_server, timeout=2)

    # When the run goes through
    result, _ = _run(container)

    # Then the step timed out (by the client's read timeout, or by the step's own deadline when
    # a busy machine spends the margin before the request is sent), and each attempt's request
    # (at most one per attempt) was abandoned before the next one was sent: no paid calls overlap
    assert result.outputs["why"] in ("LLMTimeoutError", "StepTimeoutError")
    assert 1 <= openai_server.calls <= 3
    assert [r.held_open for r in openai_server.received] == [0] * openai_server.calls
    assert openai_server.wait_for(lambda: openai_server.hung_up == openai_server.calls)


def test_bedrock_steps_answer_through_the_bedrock_endpoint(
    make_embedded: MakeContainer, bedrock_server: FakeBedrock
) -> None:
    # Given Bedrock as the default provider, at its own endpoint
    bedrock_server.tool_answer({"title": "Owls"}, input_tokens=30, output_tokens=4)
    container = _container(
        make_embedded, default_llm_provider="bedrock", bedrock_endpoint_url=bedrock_server.url
    )

    # When the run goes through
    result, events = _run(container)

    # Then one Converse call answered the step, with the block's limit, and its tokens counted
    assert result.status == "succeeded"
    assert bedrock_server.calls == 1
    assert bedrock_server.received[0].body["inferenceConfig"]["maxTokens"] == 120
    assert _tokens(events) == 34


def test_bedrock_is_never_the_emulator_nor_its_credentials() -> None:
    # Given a container whose AWS endpoint is the local emulator (as under `make dev`)
    from langorch.config import Settings
    from langorch.llm import LLMRequest

    with FakeBedrock().running() as server:
        server.tool_answer({"title": "Owls"})  # type: ignore[attr-defined]
        settings = Settings(
            endpoint_url="http://127.0.0.1:9",
            default_llm_provider="bedrock",
            bedrock_endpoint_url=server.url,
        )

        # When a Bedrock call is made through the registry it builds
        Container(settings).llm.invoke(
            LLMRequest(
                run_id="r",
                step_id="s",
                block_id=None,
                provider="bedrock",
                model=None,
                system_prompt="",
                prompt="p",
                output_keys=["title"],
            )
        )

        # Then it went to Bedrock's endpoint, signed with the caller's credential chain (the
        # environment's), not the emulator's fixed "local" ones
        assert server.calls == 1
        assert "Credential=testing/" in server.received[0].headers["authorization"]


def test_a_bedrock_call_past_the_step_timeout_ends_before_the_retry(
    make_embedded: MakeContainer, bedrock_server: FakeBedrock
) -> None:
    # Given Bedrock takes 30 s, and a step with a 2 s timeout, 2 retries and no backoff
    container = _slow_bedrock(make_embedded, bedrock_server)

    # When the run goes through
    result, _ = _run(container)

    # Then the step timed out — by the client's read timeout, or by the step's own deadline
    # when a busy machine spends the margin before the request is sent: which of the two fires
    # first is the machine's speed, not the behaviour — and each attempt's request (at most
    # one per attempt) was abandoned before the next one was sent
    assert result.outputs["why"] in ("LLMTimeoutError", "StepTimeoutError")
    assert 1 <= bedrock_server.calls <= 3
    assert [r.held_open for r in bedrock_server.received] == [0] * bedrock_server.calls
    assert bedrock_server.wait_for(lambda: bedrock_server.hung_up == bedrock_server.calls)


def test_an_attempt_cut_off_before_its_request_left_ends_when_that_request_has_closed(
    make_embedded: MakeContainer, bedrock_server: FakeBedrock
) -> None:
    # Given Bedrock takes 30 s, a step with a 2 s timeout and 2 retries, and a first request
    # that leaves 1.5 s into its attempt, as on a busy machine (its 2 s read timeout then ends
    # 1.5 s after the step's deadline)
    container = _slow_bedrock(make_embedded, bedrock_server)
    build = container._bedrock_client
    sends: list[bool] = []

    def late_first_send(**_: Any) -> None:
        if not sends:
            time.sleep(1.5)  # the fault injected: a send held up, not a wait for anything
        sends.append(True)

    def slow_to_send(read_timeout: float) -> Any:
        client = build(read_timeout)
        client.meta.events.register_first("before-send.bedrock-runtime", late_first_send)
        return client

    container.__dict__["_bedrock_client"] = slow_to_send
    # When the run goes through
    result, _ = _run(container)
    # Then the step timed out, and no attempt sent while an earlier one's request was open (on a
    # slow machine the first attempt may be given up before its send: that request never leaves)
    assert result.outputs["why"] in ("LLMTimeoutError", "StepTimeoutError")
    assert bedrock_server.calls >= 1
    assert [r.held_open for r in bedrock_server.received] == [0] * bedrock_server.calls
