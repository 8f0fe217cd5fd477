"""The OpenAI provider end to end against a fake OpenAI-compatible server on 127.0.0.1.

The real ``langchain-openai`` and ``openai`` code runs; only the HTTP peer is fake.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from functools import partial
from typing import Any

import pytest

from langorch.domain.errors import LLMError, ProviderNotAvailableError
from langorch.llm import LLMRegistry, is_retryable
from tests.llm_servers import completion
from tests.support.llm import an_llm_request
from tests.support.loopback import JsonHandler, serving


class FakeOpenAI:
    """Answers POST /v1/chat/completions with queued replies and records each request body."""

    def __init__(self) -> None:
        self.replies: list[tuple[int, dict[str, Any]]] = []
        self.requests: list[dict[str, Any]] = []
        self.paths: list[str] = []
        fake = self

        class Handler(JsonHandler):
            def do_POST(self) -> None:
                fake.paths.append(self.path)
                fake.requests.append(json.loads(self.body()))
                self.send_json(*fake.replies.pop(0) if fake.replies else (500, {"error": {}}))

        self.handler = Handler
        self.base_url = ""
        """Set while the fixture serves it: ``http://127.0.0.1:<port>/v1``."""

    def answer(
        self, content: dict[str, Any], *, prompt_tokens: int = 0, completion_tokens: int = 0
    ) -> None:
        """Queue a chat completion whose message content is ``content`` as JSON."""
        message = {"role": "assistant", "content": json.dumps(content)}
        self.replies.append((200, completion(message, "stop", prompt_tokens, completion_tokens)))

    def tool_call(
        self, name: str, args: dict[str, Any], *, prompt_tokens: int = 0, completion_tokens: int = 0
    ) -> None:
        """Queue a chat completion that calls tool ``name`` with ``args``."""
        message = {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": name, "arguments": json.dumps(args)},
                }
            ],
        }
        self.replies.append(
            (200, completion(message, "tool_calls", prompt_tokens, completion_tokens))
        )

    def error(self, status: int, message: str) -> None:
        """Queue an OpenAI-shaped error answer."""
        self.replies.append(
            (status, {"error": {"message": message, "type": "error", "code": None}})
        )


@pytest.fixture
def fake_openai() -> Iterator[FakeOpenAI]:
    fake = FakeOpenAI()
    with serving(fake.handler) as url:
        fake.base_url = f"{url}/v1"
        yield fake


def _registry(fake: FakeOpenAI) -> LLMRegistry:
    return LLMRegistry(
        default_provider="openai", openai_api_key="sk-test", openai_base_url=fake.base_url
    )


_request = partial(
    an_llm_request,
    provider="openai",
    system_prompt="You write drafts.",
    prompt="Write a title and a word count.",
    output_keys=["title", "words"],
    output_types={"words": "integer"},
)


def test_openai_answer_is_the_structured_content_with_its_token_usage(
    fake_openai: FakeOpenAI,
) -> None:
    # Given a server that answers with JSON content and a usage block
    fake_openai.answer({"title": "Hello", "words": 3}, prompt_tokens=21, completion_tokens=9)

    # When a step asks the OpenAI provider for its outputs
    result = _registry(fake_openai).invoke(_request())

    # Then the outputs, the default model and the billed tokens come back
    assert result.outputs == {"title": "Hello", "words": 3}
    assert (result.provider, result.model) == ("openai", "gpt-4o-mini")
    assert (result.input_tokens, result.output_tokens) == (21, 9)


def test_openai_request_carries_a_strict_json_schema_of_the_output_keys(
    fake_openai: FakeOpenAI,
) -> None:
    # Given a decision step with typed outputs
    fake_openai.answer({"title": "x", "words": 1, "branch": "yes"})

    # When it is sent to the OpenAI provider
    _registry(fake_openai).invoke(_request(choices=["yes", "no"]))

    # Then the chat-completions request asks for a strict JSON schema: every key required,
    # declared types, and the branch as an enum of the labels
    assert fake_openai.paths == ["/v1/chat/completions"]
    response_format = fake_openai.requests[0]["response_format"]
    assert response_format["type"] == "json_schema"
    assert response_format["json_schema"]["strict"] is True
    schema = response_format["json_schema"]["schema"]
    assert schema["properties"] == {
        "title": {"type": "string"},
        "words": {"type": "integer"},
        "branch": {
            "type": "string",
            "enum": ["yes", "no"],
            "description": "The chosen label: exactly one of yes, no",
        },
    }
    assert sorted(schema["required"]) == ["branch", "title", "words"]
    assert schema["additionalProperties"] is False


def test_openai_schema_with_free_form_values_is_not_strict(fake_openai: FakeOpenAI) -> None:
    # Given a step whose output is a free-form object (strict mode cannot describe it)
    fake_openai.answer({"title": "x", "words": 1, "meta": {"a": 1}})

    # When it is sent
    _registry(fake_openai).invoke(
        _request(
            output_keys=["title", "words", "meta"],
            output_types={"words": "integer", "meta": "object"},
        )
    )

    # Then the schema is sent non-strict and the object comes back as is
    assert fake_openai.requests[0]["response_format"]["json_schema"]["strict"] is False


def test_openai_messages_are_the_system_prompt_and_the_prompt(fake_openai: FakeOpenAI) -> None:
    # Given a server that answers
    fake_openai.answer({"title": "x", "words": 1})

    # When a step with a system prompt and a temperature calls it
    _registry(fake_openai).invoke(_request(model="gpt-test", temperature=0.2))

    # Then the request carries both messages, the model and the temperature
    body = fake_openai.requests[0]
    assert body["messages"] == [
        {"role": "system", "content": "You write drafts."},
        {"role": "user", "content": "Write a title and a word count."},
    ]
    assert (body["model"], body["temperature"]) == ("gpt-test", 0.2)


def test_openai_tool_call_runs_the_tool_and_feeds_its_result_to_the_answer(
    fake_openai: FakeOpenAI,
) -> None:
    # Given a model that first calls the calculator, then (after the tool round) answers
    fake_openai.tool_call(
        "calculator", {"expression": "6*7"}, prompt_tokens=10, completion_tokens=4
    )
    fake_openai.answer({"total": "done"}, prompt_tokens=5, completion_tokens=2)
    fake_openai.answer({"total": "42"}, prompt_tokens=30, completion_tokens=3)

    # When a step with the calculator tool runs
    result = _registry(fake_openai).invoke(
        _request(output_keys=["total"], output_types={}, tools=["calculator"])
    )

    # Then the tool was offered, its result reached the structured call, and tokens of all
    # three calls are summed
    assert [t["function"]["name"] for t in fake_openai.requests[0]["tools"]] == ["calculator"]
    tool_reply = fake_openai.requests[1]["messages"][-1]
    assert (tool_reply["role"], tool_reply["content"]) == ("tool", "42")
    final_prompt = fake_openai.requests[2]["messages"][-1]["content"]
    assert 'calculator({"expression": "6*7"}) -> 42' in final_prompt
    assert "tools" not in fake_openai.requests[2]
    assert result.outputs == {"total": "42"}
    assert (result.input_tokens, result.output_tokens) == (45, 9)


def test_openai_answer_missing_a_key_is_an_error_naming_it(fake_openai: FakeOpenAI) -> None:
    # Given a (non-strict) model that leaves out a key
    fake_openai.answer({"title": "Hello"})

    # When the step runs
    with pytest.raises(LLMError, match="'words'") as caught:
        _registry(fake_openai).invoke(_request())

    # Then the error names the key, and another attempt may get a complete answer
    assert is_retryable(caught.value)


def test_openai_throttling_is_a_retryable_error(fake_openai: FakeOpenAI) -> None:
    # Given a server that answers 429
    fake_openai.error(429, "Rate limit reached")

    # When the step runs
    with pytest.raises(LLMError, match="429") as caught:
        _registry(fake_openai).invoke(_request())

    # Then the error is marked retryable
    assert is_retryable(caught.value)


def test_openai_bad_request_is_not_retryable(fake_openai: FakeOpenAI) -> None:
    # Given a server that answers 400
    fake_openai.error(400, "Invalid schema")

    # When the step runs
    with pytest.raises(LLMError, match="Invalid schema") as caught:
        _registry(fake_openai).invoke(_request())

    # Then retrying would not help
    assert not is_retryable(caught.value)


def test_openai_rejected_key_is_provider_not_available_without_the_key(
    fake_openai: FakeOpenAI,
) -> None:
    # Given a server that rejects the key
    fake_openai.error(401, "Incorrect API key provided: sk-test")

    # When the step runs
    with pytest.raises(ProviderNotAvailableError) as caught:
        _registry(fake_openai).invoke(_request())

    # Then the error says to configure a key and does not repeat it
    assert "configure a valid key" in str(caught.value)
    assert "sk-test" not in str(caught.value)


def test_openai_without_a_key_is_provider_not_available() -> None:
    # Given a registry whose key lookup finds nothing
    registry = LLMRegistry(openai_api_key=lambda: None)

    # When an OpenAI step runs
    # Then the error says where to put the key
    with pytest.raises(ProviderNotAvailableError, match="Secrets Manager"):
        registry.invoke(_request())


def test_missing_key_is_not_worth_a_retry() -> None:
    # Given a registry with no OpenAI key
    registry = LLMRegistry(openai_api_key=None)

    # When an OpenAI step runs
    with pytest.raises(ProviderNotAvailableError) as caught:
        registry.invoke(_request())

    # Then the error is marked not retryable (the engine retries unmarked errors)
    assert caught.value.retryable is False  # type: ignore[attr-defined]


def test_openai_without_the_sdk_is_provider_not_available(monkeypatch: pytest.MonkeyPatch) -> None:
    # Given langchain-openai cannot be imported
    monkeypatch.setitem(sys.modules, "langchain_openai", None)

    # When an OpenAI step runs
    # Then the error says what to install
    with pytest.raises(ProviderNotAvailableError, match=r"pip install 'langorch\[openai\]'"):
        LLMRegistry(openai_api_key="sk-test").invoke(_request())


def test_openai_key_is_fetched_once_at_the_first_call(fake_openai: FakeOpenAI) -> None:
    # Given a key lookup that counts its calls
    lookups: list[int] = []

    def key() -> str:
        lookups.append(1)
        return "sk-test"

    registry = LLMRegistry(openai_api_key=key, openai_base_url=fake_openai.base_url)
    fake_openai.answer({"title": "a", "words": 1})
    fake_openai.answer({"title": "b", "words": 2})

    # When the registry is built, then two calls with the same model and temperature are made
    assert lookups == []
    registry.invoke(_request())
    registry.invoke(_request())

    # Then the key was fetched once (the chat model is cached)
    assert lookups == [1]


_LAZY_SCRIPT = """
import sys
from langorch.llm import LLMRegistry, LLMRequest
sdk = ("langchain_openai", "openai")
registry = LLMRegistry(openai_api_key="sk-test", openai_base_url=sys.argv[1])
registry.provider("openai")
request = LLMRequest(run_id="r", step_id="s", block_id=None, provider="openai", model=None,
                     system_prompt="", prompt="p", output_keys=["title"])
registry.invoke(LLMRequest(**{**request.__dict__, "provider": "offline"}))
before = [m for m in sdk if m in sys.modules]
result = registry.invoke(request)
after = [m for m in sdk if m in sys.modules]
print(before, after, result.outputs)
"""


@pytest.mark.subprocess
def test_openai_sdk_is_imported_by_the_first_openai_call_only(fake_openai: FakeOpenAI) -> None:
    # Given a fresh interpreter with a registry, the openai provider looked up, an offline call
    fake_openai.answer({"title": "Hello"})

    # When the first OpenAI call is made
    out = subprocess.run(
        [sys.executable, "-c", _LAZY_SCRIPT, fake_openai.base_url],
        capture_output=True,
        text=True,
        check=True,
    ).stdout

    # Then the SDK was absent before it and present after it
    assert out.strip() == "[] ['langchain_openai', 'openai'] {'title': 'Hello'}"
