"""Failures named for what they are, through the real SDKs against loopback servers.

Each case starts an OpenAI-compatible server or a Bedrock Converse endpoint on 127.0.0.1, drives
langchain-openai / langchain-aws (and so openai / boto3) through it, and counts the requests the
server received: one attempt is one paid request, never more.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from langorch.adapters.aws import bedrock_runtime_client
from langorch.llm import LLMRegistry, LLMRequest, is_retryable
from langorch.llm.calls import call_model, retry_delay
from langorch.llm.errors import (
    GuardrailInterventionError,
    LLMTimeoutError,
    MalformedOutputError,
    ModelRefusalError,
    OutputTruncatedError,
    ThrottledError,
)
from langorch.llm.settings import BedrockSettings
from tests.llm_servers import FakeBedrock, FakeOpenAI, Reply, converse
from tests.support.llm import an_llm_request, sdks_imported
from tests.support.polling import PATIENCE

# Imported before the first timed call, by the worker that runs this file only.
_sdks = sdks_imported("langchain_aws", "langchain_openai")


def _openai(server: FakeOpenAI) -> LLMRegistry:
    return LLMRegistry(
        default_provider="openai", openai_api_key="sk-test", openai_base_url=server.base_url
    )


def _bedrock(server: FakeBedrock, **settings: Any) -> LLMRegistry:
    def client(read_timeout: float) -> Any:
        return bedrock_runtime_client(
            region="us-east-1", read_timeout=read_timeout, endpoint_url=server.url
        )

    return LLMRegistry(
        default_provider="bedrock",
        bedrock=BedrockSettings(region="us-east-1", **settings),
        bedrock_client_factory=client,
    )


def _request(provider: str, **overrides: Any) -> LLMRequest:
    fields = {"system_prompt": "You write drafts.", "attempt": 1, "max_attempts": 3, **overrides}
    return an_llm_request(provider=provider, **fields)


def _call(registry: LLMRegistry, request: LLMRequest, budget: float | None = 30.0) -> Any:
    return asyncio.run(call_model(registry, request, budget_seconds=budget))


# --- OpenAI ------------------------------------------------------------------------------------


def test_openai_refusal_is_named_with_the_models_words_and_not_retried(
    openai_server: FakeOpenAI,
) -> None:
    # Given a model that refuses (structured outputs' refusal field)
    openai_server.answer(None, refusal="I can't help with that.", completion_tokens=7)

    # When a step asks for its answer
    with pytest.raises(ModelRefusalError) as caught:
        _call(_openai(openai_server), _request("openai"))

    # Then the error quotes the model, names block and step, says it is not retried and why,
    # and carries the billed tokens; one request was made
    message = str(caught.value)
    assert "I can't help with that." in message
    assert "block 'write_draft' (step 'draft')" in message
    assert "Not retried" in message and "Fix:" in message
    assert not is_retryable(caught.value)
    assert caught.value.tokens == {"input": 10, "output": 7}
    assert openai_server.calls == 1


def test_openai_answer_cut_by_max_tokens_is_never_accepted(openai_server: FakeOpenAI) -> None:
    # Given an answer cut mid-value by the output limit (LangChain's partial-JSON repair would
    # have turned it into {"title": "Hel"})
    openai_server.answer('{"title": "Hel', finish="length", completion_tokens=16)

    # When a step with max_tokens=16 asks for it
    with pytest.raises(OutputTruncatedError) as caught:
        _call(_openai(openai_server), _request("openai", max_tokens=16))

    # Then the cut-off is named, with the limit and the fix, not retried, tokens kept
    assert "max_tokens=16" in str(caught.value)
    assert "raise max_tokens" in str(caught.value)
    assert not is_retryable(caught.value)
    assert caught.value.tokens == {"input": 10, "output": 16}
    assert openai_server.received[0].body["max_completion_tokens"] == 16
    assert openai_server.calls == 1


def test_openai_malformed_answer_is_named_and_retryable(openai_server: FakeOpenAI) -> None:
    # Given a server (a compatible one, no strict mode) answering with prose
    openai_server.answer("Sure! The title is Hello.")

    # When the step asks
    with pytest.raises(MalformedOutputError) as caught:
        _call(_openai(openai_server), _request("openai"))

    # Then the answer is quoted and another attempt may do better
    assert "Sure! The title is Hello." in str(caught.value)
    assert "will try again (attempt 1 of 3)" in str(caught.value)
    assert is_retryable(caught.value)


def test_openai_content_filter_is_a_guardrail_intervention(openai_server: FakeOpenAI) -> None:
    # Given Azure's content filter stops the answer
    openai_server.answer("", finish="content_filter")

    # When the step asks
    with pytest.raises(GuardrailInterventionError) as caught:
        _call(_openai(openai_server), _request("openai"))

    # Then it is named, and not retried unchanged
    assert "content filter" in str(caught.value)
    assert not is_retryable(caught.value)
    assert openai_server.calls == 1


@pytest.mark.parametrize(
    ("headers", "message", "wait"),
    [
        ({"retry-after": "7"}, "Rate limit reached", 7.0),
        ({"retry-after-ms": "1500"}, "Rate limit reached", 1.5),
        ({}, "Rate limit reached for gpt-4o-mini. Please try again in 20s.", 20.0),
        ({}, "Rate limit reached. Please try again in 300ms.", 0.3),
    ],
)
def test_openai_throttling_carries_the_servers_wait(
    openai_server: FakeOpenAI, headers: dict[str, str], message: str, wait: float
) -> None:
    # Given a 429 with a wait in a header or in the message
    openai_server.error(429, message, headers)

    # When the step asks
    with pytest.raises(ThrottledError) as caught:
        _call(_openai(openai_server), _request("openai"))

    # Then the wait is read, and the SDK did not retry underneath the step (one request)
    assert caught.value.retry_after == pytest.approx(wait)
    assert is_retryable(caught.value)
    assert openai_server.calls == 1
    # And the step waits that long, but never longer than its own time
    assert retry_delay(caught.value, limit_seconds=60) == pytest.approx(wait)
    assert retry_delay(caught.value, limit_seconds=0.1) == pytest.approx(0.1)


def test_openai_throttling_says_the_status_once_with_the_servers_words(
    openai_server: FakeOpenAI,
) -> None:
    # Given a 429 with the server's explanation
    openai_server.error(429, "Rate limit reached for gpt-4o-mini in organization org-1.")

    # When the step asks
    with pytest.raises(ThrottledError) as caught:
        _call(_openai(openai_server), _request("openai"))

    # Then the message has the status once, then what the server said
    message = str(caught.value)
    assert "HTTP 429: Rate limit reached for gpt-4o-mini in organization org-1." in message
    assert message.count("429") == 1


def test_openai_unreachable_says_connection_error_and_the_url_it_tried_never_the_key() -> None:
    # Given a base URL where nothing answers any more (a server that was there and stopped)
    server = FakeOpenAI()
    with server.running():
        base_url = server.base_url
    registry = LLMRegistry(
        default_provider="openai", openai_api_key="sk-test-secret-key", openai_base_url=base_url
    )

    # When a step asks
    with pytest.raises(Exception) as caught:
        _call(registry, _request("openai"))

    # Then the message says it could not connect, where it tried, and never the key; and it
    # is worth another attempt
    message = str(caught.value)
    assert "Connection error" in message
    assert f"{base_url}/chat/completions" in message
    assert "sk-test-secret-key" not in message
    assert is_retryable(caught.value)


def test_openai_server_error_is_one_request_per_attempt(openai_server: FakeOpenAI) -> None:
    # Given a server failing with 500 (the SDK alone would try 3 times)
    openai_server.error(500, "upstream failed")

    # When one attempt is made
    with pytest.raises(Exception) as caught:
        _call(_openai(openai_server), _request("openai"))

    # Then it is retryable by the step, and exactly one request was paid for
    assert is_retryable(caught.value)
    assert openai_server.calls == 1


def test_openai_call_past_the_step_budget_is_cancelled_and_its_request_abandoned(
    openai_server: FakeOpenAI,
) -> None:
    # Given a server that answers once, then takes 30 s; the first call has loaded the SDK
    # (cold, on a busy machine, that alone can outlast 3 s: no request would be sent to abandon)
    openai_server.answer({"title": "warm"})
    openai_server.answer({"title": "late"}, delay=30)
    registry = _openai(openai_server)
    assert _call(registry, _request("openai")).outputs == {"title": "warm"}

    def every_late_request_hung_up() -> bool:
        return openai_server.hung_up == openai_server.calls - 1

    async def step() -> tuple[BaseException, bool]:
        # When the step has 3 s (and its event loop goes on, as a segment's does)
        try:
            await call_model(registry, _request("openai"), budget_seconds=3.0)
        except LLMTimeoutError as exc:
            # (the deadline only stops a hung test: the loop ends when the server sees it)
            # (on a very busy machine the attempt may be given up before its send: then it sent
            # nothing, and there is nothing to hang up on)
            deadline = asyncio.get_running_loop().time() + 60 * PATIENCE
            while not every_late_request_hung_up() and asyncio.get_running_loop().time() < deadline:
                await asyncio.sleep(0.01)
            return exc, every_late_request_hung_up()
        raise AssertionError("the call should have timed out")

    error, hung_up = asyncio.run(step())

    # Then the timeout is named and retryable, and the server saw the client hang up (the HTTP
    # request was abandoned, not left running)
    assert "timeout_seconds" in str(error)
    assert is_retryable(error)
    assert hung_up
    assert openai_server.calls <= 2


def test_openai_settings_reach_the_request(openai_server: FakeOpenAI) -> None:
    # Given an organisation, a project, a temperature and max_tokens by default
    from langorch.llm.settings import OpenAISettings

    registry = LLMRegistry(
        default_provider="openai",
        openai_api_key="sk-test",
        openai=OpenAISettings(
            base_url=openai_server.base_url, organization="org-1", project="proj-1"
        ),
        default_max_tokens=300,
        default_temperature=0.3,
    )
    openai_server.answer({"title": "Hello"})

    # When a step that sets neither runs
    result = _call(registry, _request("openai"))

    # Then the defaults and the headers were sent, with the key as a bearer token
    sent = openai_server.received[0]
    assert (sent.body["max_completion_tokens"], sent.body["temperature"]) == (300, 0.3)
    headers = sent.headers
    assert headers["openai-organization"] == "org-1"
    assert headers["openai-project"] == "proj-1"
    assert headers["authorization"] == "Bearer sk-test"
    assert result.outputs == {"title": "Hello"}


# --- Bedrock -----------------------------------------------------------------------------------


def test_bedrock_guardrail_intervention_is_named_with_its_message(
    bedrock_server: FakeBedrock,
) -> None:
    # Given a guardrail that blocks the answer
    bedrock_server.text("Sorry, this topic is blocked.", stop="guardrail_intervened")

    # When a step with a guardrail configured asks
    registry = _bedrock(bedrock_server, guardrail_id="gr-1", guardrail_version="3")
    with pytest.raises(GuardrailInterventionError) as caught:
        _call(registry, _request("bedrock"))

    # Then the guardrail's words are quoted, it is not retried, tokens are kept, and the
    # request carried the guardrail
    assert "Sorry, this topic is blocked." in str(caught.value)
    assert not is_retryable(caught.value)
    assert caught.value.tokens == {"input": 20, "output": 8}
    config = bedrock_server.received[0].body["guardrailConfig"]
    assert (config["guardrailIdentifier"], config["guardrailVersion"]) == ("gr-1", "3")
    assert bedrock_server.calls == 1


def test_bedrock_answer_cut_by_max_tokens_is_named(bedrock_server: FakeBedrock) -> None:
    # Given the answer tool's input was cut by the output limit
    bedrock_server.tool_answer({}, stop="max_tokens", output_tokens=64)

    # When a step with max_tokens=64 asks
    with pytest.raises(OutputTruncatedError) as caught:
        _call(_bedrock(bedrock_server), _request("bedrock", max_tokens=64))

    # Then it is named (not "missing keys"), not retried, and the limit was sent
    assert "max_tokens=64" in str(caught.value)
    assert not is_retryable(caught.value)
    assert bedrock_server.received[0].body["inferenceConfig"]["maxTokens"] == 64
    assert bedrock_server.calls == 1


def test_bedrock_text_instead_of_the_forced_answer_is_a_refusal(
    bedrock_server: FakeBedrock,
) -> None:
    # Given a model that writes text instead of calling the forced answer tool
    bedrock_server.text("I won't write that.")

    # When the step asks
    with pytest.raises(ModelRefusalError) as caught:
        _call(_bedrock(bedrock_server), _request("bedrock"))

    # Then its words are the error, and it is not retried
    assert "I won't write that." in str(caught.value)
    assert not is_retryable(caught.value)


def test_bedrock_throttling_is_one_request_with_the_servers_wait(
    bedrock_server: FakeBedrock,
) -> None:
    # Given Bedrock throttles (boto's standard mode alone would try 3 times)
    bedrock_server.error(429, "ThrottlingException", "Too many tokens", {"Retry-After": "4"})

    # When one attempt is made
    with pytest.raises(ThrottledError) as caught:
        _call(_bedrock(bedrock_server), _request("bedrock"))

    # Then one request reached the server, and the wait is on the error
    assert bedrock_server.calls == 1
    assert caught.value.retry_after == 4.0
    assert "Too many tokens" in str(caught.value)


def test_bedrock_call_past_the_step_budget_ends_with_the_step(
    bedrock_server: FakeBedrock,
) -> None:
    # Given Bedrock answers once, then takes 30 s; the first call has loaded the SDK and
    # Bedrock's service model (cold, on a busy machine, that alone can outlast 3 s, and an
    # attempt given up before its send sends nothing: there would be no request to abandon)
    bedrock_server.tool_answer({"title": "warm"})
    bedrock_server.tool_answer({"title": "late"}, delay=30)
    registry = _bedrock(bedrock_server)
    assert _call(registry, _request("bedrock")).outputs == {"title": "warm"}

    # When the next step has 3 s
    with pytest.raises(LLMTimeoutError):
        _call(registry, _request("bedrock"), budget=3.0)

    # Then no request of the step is left running: the one it sent was abandoned too (the
    # client's read timeout is the step's time). On a quiet machine it is sent within the 3 s;
    # on a very busy one the attempt may be given up before its send, and then sends nothing.
    # The deadline only stops a hung test: a request left running is answered after the
    # server's 30 s, never hung up on, and still fails it
    def every_late_request_hung_up() -> bool:
        return bedrock_server.hung_up == bedrock_server.calls - 1

    assert bedrock_server.wait_for(every_late_request_hung_up)
    assert bedrock_server.calls <= 2


def test_bedrock_waits_no_longer_than_what_is_left_of_the_step_when_each_request_is_sent(
    bedrock_server: FakeBedrock,
) -> None:
    # Given a model that takes 2 s over its first round (it calls the calculator), then notes
    # the result and answers; and the read timeout of each Bedrock client built, recorded
    asked: list[float] = []

    def client(read_timeout: float) -> Any:
        asked.append(read_timeout)
        return bedrock_runtime_client(
            region="us-east-1", read_timeout=read_timeout, endpoint_url=bedrock_server.url
        )

    calculate = {
        "toolUse": {"toolUseId": "t0", "name": "calculator", "input": {"expression": "6*7"}}
    }
    bedrock_server.replies = [
        Reply(200, converse([calculate], "tool_use", 20, 8), delay=2),
        Reply(200, converse([{"text": "It is 42."}], "end_turn", 20, 8)),
    ]
    bedrock_server.tool_answer({"title": "Forty-two"})
    registry = LLMRegistry(
        default_provider="bedrock",
        bedrock=BedrockSettings(region="us-east-1"),
        bedrock_client_factory=client,
    )

    # When a step with 60 s asks, with the calculator bound (room for a busy machine: what is
    # checked is what each client was given, not how long anything took)
    result = _call(registry, _request("bedrock", tools=["calculator"]), budget=60.0)

    # Then the first request waited at most what the step had, and the later ones at most what
    # was left after the model's 2 s at least: an abandoned request never outlives the step
    assert result.outputs == {"title": "Forty-two"}
    assert bedrock_server.calls == 3
    assert asked[0] <= 60
    assert asked[-1] <= asked[0] - 2


def test_bedrock_rejected_model_id_names_llm_model(bedrock_server: FakeBedrock) -> None:
    # Given a retired model id
    bedrock_server.error(400, "ValidationException", "The provided model identifier is invalid.")

    # When a step uses it
    with pytest.raises(Exception) as caught:
        _call(
            _bedrock(bedrock_server),
            _request("bedrock", model="anthropic.claude-3-haiku-20240307-v1:0"),
        )

    # Then the hint says which setting to change, and it is not retried
    assert "llm_model" in str(caught.value)
    assert "anthropic.claude-3-haiku-20240307-v1:0" in str(caught.value)
    assert not is_retryable(caught.value)
    assert bedrock_server.calls == 1


def test_bedrock_retired_model_names_llm_model(bedrock_server: FakeBedrock) -> None:
    # Given a model past the end of its life, as Bedrock answers for it
    bedrock_server.error(
        404,
        "ResourceNotFoundException",
        "This model version has reached the end of its life. Please refer to the AWS "
        "documentation for more details.",
    )

    # When a step uses it
    with pytest.raises(Exception) as caught:
        _call(
            _bedrock(bedrock_server),
            _request("bedrock", model="anthropic.claude-v2:1"),
        )

    # Then the message names the model and the setting to change, and it is not retried
    message = str(caught.value)
    assert "end of its life" in message
    assert "llm_model" in message
    assert "anthropic.claude-v2:1" in message
    assert not is_retryable(caught.value)
    assert bedrock_server.calls == 1


def test_bedrock_inference_profile_prefixes_bare_model_ids(bedrock_server: FakeBedrock) -> None:
    # Given an EU inference profile and a default temperature
    bedrock_server.tool_answer({"title": "Bonjour"})
    registry = _bedrock(bedrock_server, inference_profile="eu")

    # When a step names a bare model id
    result = _call(registry, _request("bedrock", model="anthropic.claude-sonnet-4-5-v1:0"))

    # Then the profile's id is called and reported
    path = bedrock_server.received[0].path
    assert path == "/model/eu.anthropic.claude-sonnet-4-5-v1%3A0/converse"
    assert result.model == "eu.anthropic.claude-sonnet-4-5-v1:0"
    assert result.outputs == {"title": "Bonjour"}


def test_bedrock_default_model_is_a_current_one_through_the_global_profile(
    bedrock_server: FakeBedrock,
) -> None:
    # Given the defaults
    bedrock_server.tool_answer({"title": "Hi"})

    # When a step names no model
    result = _call(_bedrock(bedrock_server), _request("bedrock"))

    # Then Claude Haiku 4.5 is called through the global cross-region profile
    assert result.model == "global.anthropic.claude-haiku-4-5-20251001-v1:0"
    assert "claude-3-haiku" not in bedrock_server.received[0].path
