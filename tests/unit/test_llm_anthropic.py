"""The anthropic provider through the real ``langchain-anthropic`` and ``anthropic`` code,
against a loopback Messages API (``tests/llm_servers.py``): one attempt is one paid request."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from functools import partial
from typing import Any

import pytest

from langorch.domain.errors import LLMError, ProviderNotAvailableError
from langorch.llm import LLMRegistry, LLMRequest, is_retryable
from langorch.llm.calls import call_model
from langorch.llm.errors import ModelRefusalError, OutputTruncatedError, ThrottledError
from langorch.llm.settings import AnthropicSettings
from tests.llm_servers import FakeAnthropic
from tests.support.llm import an_llm_request, sdks_imported

# Imported before the first timed call, by the worker that runs this file only.
_sdks = sdks_imported("langchain_anthropic")


@pytest.fixture
def server() -> Iterator[FakeAnthropic]:
    with FakeAnthropic().running() as running:
        yield running  # type: ignore[misc]


def _registry(server: FakeAnthropic, key: str | None = "sk-ant-test") -> LLMRegistry:
    return LLMRegistry(
        default_provider="anthropic",
        anthropic_api_key=key,
        anthropic=AnthropicSettings(base_url=server.url),
    )


_request = partial(
    an_llm_request,
    provider="anthropic",
    system_prompt="You write drafts.",
    attempt=1,
    max_attempts=3,
)


def _call(registry: LLMRegistry, request: LLMRequest) -> Any:
    return asyncio.run(call_model(registry, request, budget_seconds=30.0))


def test_the_answer_is_the_forced_tool_input_with_its_token_usage(
    server: FakeAnthropic,
) -> None:
    # Given Claude answering through the answer tool
    server.tool_answer({"title": "Hello"}, input_tokens=31, output_tokens=9)
    # When a step asks
    result = _call(_registry(server), _request())
    # Then the answer, the tokens and the model come back, from one request
    assert result.outputs == {"title": "Hello"}
    assert (result.input_tokens, result.output_tokens) == (31, 9)
    assert result.provider == "anthropic"
    assert result.model == "claude-haiku-4-5-20251001"
    assert server.calls == 1


def test_the_request_forces_a_tool_whose_schema_is_the_output_keys(
    server: FakeAnthropic,
) -> None:
    # Given a decision step and Claude answering it
    server.tool_answer({"branch": "urgent"})
    # When it asks with its labels and an output limit
    _call(_registry(server), _request(output_keys=[], choices=["urgent", "normal"], max_tokens=64))
    # Then the request forced the answer tool, constrained to the labels, with the key and limit
    sent = server.received[0]
    assert sent.path == "/v1/messages"
    credentials = sent.headers.get("x-api-key") or sent.headers.get("authorization", "")
    assert credentials.endswith("sk-ant-test")  # whichever header this SDK version sends it in
    assert sent.body["tool_choice"] == {"type": "tool", "name": "answer"}
    schema = sent.body["tools"][0]["input_schema"]
    assert schema["properties"]["branch"]["enum"] == ["urgent", "normal"]
    assert sent.body["max_tokens"] == 64
    assert sent.body["system"] == "You write drafts."


def test_calls_in_two_event_loops_both_answer(server: FakeAnthropic) -> None:
    # Given one registry, as a warm Lambda keeps it across invocations
    server.tool_answer({"title": "Hello"})
    registry = _registry(server)
    # When two invocations, each with its own event loop, call it
    first = _call(registry, _request())
    second = _call(registry, _request())
    # Then both answer (no client of a closed loop is reused)
    assert first.outputs == second.outputs == {"title": "Hello"}


def test_an_answer_cut_by_max_tokens_is_never_accepted(server: FakeAnthropic) -> None:
    # Given an answer stopped by the output limit
    server.tool_answer({"title": "Hel"}, stop="max_tokens", output_tokens=16)
    # When the step asks, then the cut-off is named, not retried, tokens kept
    with pytest.raises(OutputTruncatedError) as caught:
        _call(_registry(server), _request(max_tokens=16))
    assert "max_tokens=16" in str(caught.value)
    assert not is_retryable(caught.value)
    assert caught.value.tokens == {"input": 20, "output": 16}


def test_text_instead_of_the_forced_answer_is_a_refusal(server: FakeAnthropic) -> None:
    # Given Claude declining in words
    server.text("I can't help with that.", stop="refusal")
    # When the step asks, then the refusal is named with its words and not retried
    with pytest.raises(ModelRefusalError, match=r"I can't help with that\.") as caught:
        _call(_registry(server), _request())
    assert not is_retryable(caught.value)


def test_throttling_is_one_request_with_the_servers_wait(server: FakeAnthropic) -> None:
    # Given a 429 asking to wait 7 seconds
    server.error(
        429,
        "rate_limit_error",
        "Number of requests has exceeded your rate limit",
        {"retry-after": "7"},
    )
    # When the step asks
    with pytest.raises(ThrottledError) as caught:
        _call(_registry(server), _request())
    # Then the wait is read, and the SDK did not retry underneath the step
    assert caught.value.retry_after == pytest.approx(7.0)
    assert "HTTP 429: Number of requests has exceeded your rate limit" in str(caught.value)
    assert is_retryable(caught.value)
    assert server.calls == 1


def test_an_overloaded_api_is_worth_another_attempt(server: FakeAnthropic) -> None:
    # Given Anthropic answering 529 Overloaded
    server.error(529, "overloaded_error", "Overloaded")
    # When the step asks, then the failure is retryable and says what the server said
    with pytest.raises(LLMError, match="HTTP 529: Overloaded") as caught:
        _call(_registry(server), _request())
    assert is_retryable(caught.value)


def test_an_unknown_model_names_llm_model(server: FakeAnthropic) -> None:
    # Given a Bedrock model id sent to Anthropic's API
    server.error(404, "not_found_error", "model: anthropic.claude-v2")
    # When the step asks, then the hint says which setting to fix, and it is not retried
    with pytest.raises(LLMError, match="Check llm_model") as caught:
        _call(_registry(server), _request(model="anthropic.claude-v2"))
    assert not is_retryable(caught.value)


def test_a_refused_key_is_provider_not_available_without_the_key(server: FakeAnthropic) -> None:
    # Given a server refusing the key
    server.error(401, "authentication_error", "invalid x-api-key sk-ant-test")
    # When the step asks, then it is named, with the setting to fix and never the key
    with pytest.raises(ProviderNotAvailableError, match="LANGORCH_ANTHROPIC_API_KEY") as caught:
        _call(_registry(server), _request())
    assert "sk-ant-test" not in str(caught.value)


def test_without_a_key_the_error_says_where_to_put_it(server: FakeAnthropic) -> None:
    # Given no key anywhere
    registry = _registry(server, key=None)
    # When a step prepares the provider, then the error names both variables and nothing was sent
    with pytest.raises(ProviderNotAvailableError, match="ANTHROPIC_API_KEY"):
        registry.prepare("anthropic")
    assert server.calls == 0
