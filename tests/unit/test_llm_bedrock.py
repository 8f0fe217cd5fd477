"""The Bedrock provider through the real langchain-aws code path.

A real boto3 ``bedrock-runtime`` client answers from botocore's ``Stubber`` (moto has no Converse),
so the request langchain-aws builds is checked against the service model and nothing leaves
the process.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from functools import partial
from pathlib import Path
from typing import Any

import boto3
import pytest
from botocore.stub import Stubber

from langorch.domain.errors import LLMError, ProviderNotAvailableError
from langorch.llm import LLMRegistry, is_retryable
from tests.llm_servers import converse
from tests.support.llm import an_llm_request

MODEL = "global.anthropic.claude-haiku-4-5-20251001-v1:0"


class StubbedBedrock:
    """A bedrock-runtime client with a Stubber, recording the Converse parameters sent."""

    def __init__(self) -> None:
        self.client = boto3.client("bedrock-runtime", region_name="us-east-1")
        self.stubber = Stubber(self.client)
        self.sent: list[dict[str, Any]] = []
        self.client.meta.events.register(
            "provide-client-params.bedrock-runtime.Converse", self._record
        )

    def _record(self, params: dict[str, Any], **_: Any) -> None:
        self.sent.append(params)

    def answer(
        self, tool_input: dict[str, Any], *, input_tokens: int = 1, output_tokens: int = 1
    ) -> None:
        """Queue a Converse response that calls the ``answer`` tool with ``tool_input``."""
        self._tool_use("tu-1", "answer", tool_input, input_tokens, output_tokens)

    def call_tool(self, name: str, tool_input: dict[str, Any]) -> None:
        """Queue a Converse response that calls tool ``name``."""
        self._tool_use("tu-0", name, tool_input, 5, 3)

    def _tool_use(
        self,
        use_id: str,
        name: str,
        tool_input: dict[str, Any],
        input_tokens: int,
        output_tokens: int,
    ) -> None:
        content = [{"toolUse": {"toolUseId": use_id, "name": name, "input": tool_input}}]
        response = converse(content, "tool_use", input_tokens, output_tokens)
        self.stubber.add_response("converse", response)

    def fail(self, code: str, status: int) -> None:
        """Queue a Converse error."""
        self.stubber.add_client_error("converse", service_error_code=code, http_status_code=status)


@pytest.fixture
def bedrock() -> Iterator[StubbedBedrock]:
    stub = StubbedBedrock()
    with stub.stubber:
        yield stub


_request = partial(
    an_llm_request,
    step_id="check",
    block_id="check_previous_order",
    provider="bedrock",
    system_prompt="You decide.",
    prompt="Did the user order before?",
    output_keys=["reason", "confidence"],
    output_types={"confidence": "number"},
    choices=["has_preference", "no_preference"],
)


def _registry(stub: StubbedBedrock) -> LLMRegistry:
    return LLMRegistry(
        default_provider="bedrock", bedrock_client_factory=lambda timeout: stub.client
    )


def test_bedrock_answer_is_the_forced_tool_input_with_its_token_usage(
    bedrock: StubbedBedrock,
) -> None:
    # Given Bedrock answers with a call of the answer tool and a usage block
    bedrock.answer(
        {"reason": "ordered pizza", "confidence": 0.9, "branch": "has_preference"},
        input_tokens=40,
        output_tokens=12,
    )

    # When a decision step runs on Bedrock
    result = _registry(bedrock).invoke(_request())

    # Then the tool input is the answer and the usage is reported
    assert result.outputs == {
        "reason": "ordered pizza",
        "confidence": 0.9,
        "branch": "has_preference",
    }
    assert (result.provider, result.model) == ("bedrock", MODEL)
    assert (result.input_tokens, result.output_tokens) == (40, 12)


def test_bedrock_request_forces_a_tool_whose_schema_is_the_output_keys(
    bedrock: StubbedBedrock,
) -> None:
    # Given Bedrock will answer
    bedrock.answer({"reason": "r", "confidence": 1, "branch": "no_preference"})

    # When a decision step runs with a temperature
    _registry(bedrock).invoke(_request(temperature=0.0))

    # Then the Converse call forces the answer tool, whose input schema lists every key with
    # its type and the branch as an enum of the labels
    sent = bedrock.sent[0]
    assert sent["modelId"] == MODEL
    assert sent["system"] == [{"text": "You decide."}]
    assert sent["inferenceConfig"]["temperature"] == 0.0
    assert sent["toolConfig"]["toolChoice"] == {"tool": {"name": "answer"}}
    (tool,) = sent["toolConfig"]["tools"]
    schema = tool["toolSpec"]["inputSchema"]["json"]
    assert schema["properties"]["reason"] == {"type": "string"}
    assert schema["properties"]["confidence"] == {"type": "number"}
    assert schema["properties"]["branch"]["enum"] == ["has_preference", "no_preference"]
    assert sorted(schema["required"]) == ["branch", "confidence", "reason"]


def test_bedrock_tool_rounds_run_the_tool_then_force_the_answer(bedrock: StubbedBedrock) -> None:
    # Given a model that calls the calculator twice, then answers
    bedrock.call_tool("calculator", {"expression": "2+2"})
    bedrock.call_tool("calculator", {"expression": "4*10"})
    bedrock.call_tool("calculator", {"expression": "40+2"})
    bedrock.answer({"total": "42"}, input_tokens=20, output_tokens=4)

    # When a step with the calculator tool runs
    result = _registry(bedrock).invoke(
        _request(output_keys=["total"], output_types={}, choices=None, tools=["calculator"])
    )

    # Then at most three tool rounds ran (the calculator offered, not forced), the answer call
    # forced the answer tool with the results in its prompt, and all tokens are counted
    assert len(bedrock.sent) == 4
    assert [t["toolSpec"]["name"] for t in bedrock.sent[0]["toolConfig"]["tools"]] == ["calculator"]
    assert "toolChoice" not in bedrock.sent[0]["toolConfig"]
    final = bedrock.sent[3]
    assert final["toolConfig"]["toolChoice"] == {"tool": {"name": "answer"}}
    (message,) = final["messages"]
    assert 'calculator({"expression": "40+2"}) -> 42' in message["content"][0]["text"]
    assert result.outputs == {"total": "42"}
    assert (result.input_tokens, result.output_tokens) == (35, 13)


def test_bedrock_branch_outside_the_choices_is_an_error_listing_them(
    bedrock: StubbedBedrock,
) -> None:
    # Given a model that ignores the enum
    bedrock.answer({"reason": "r", "confidence": 1, "branch": "maybe"})

    # When the decision runs
    # Then the error lists the allowed labels
    with pytest.raises(LLMError, match="'has_preference', 'no_preference'"):
        _registry(bedrock).invoke(_request())


def test_bedrock_throttling_is_a_retryable_error(bedrock: StubbedBedrock) -> None:
    # Given Bedrock throttles
    bedrock.fail("ThrottlingException", 429)

    # When the step runs
    with pytest.raises(LLMError, match="ThrottlingException") as caught:
        _registry(bedrock).invoke(_request())

    # Then the error is marked retryable
    assert is_retryable(caught.value)


def test_bedrock_validation_error_is_not_retryable(bedrock: StubbedBedrock) -> None:
    # Given Bedrock rejects the request
    bedrock.fail("ValidationException", 400)

    # When the step runs
    with pytest.raises(LLMError, match="ValidationException") as caught:
        _registry(bedrock).invoke(_request())

    # Then retrying would not help
    assert not is_retryable(caught.value)


def test_bedrock_access_denied_is_provider_not_available(bedrock: StubbedBedrock) -> None:
    # Given the caller has no model access
    bedrock.fail("AccessDeniedException", 403)

    # When the step runs
    # Then the error says what to check
    with pytest.raises(ProviderNotAvailableError, match="model access"):
        _registry(bedrock).invoke(_request())


def test_bedrock_without_credentials_is_provider_not_available(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # Given no AWS credentials anywhere (and no instance metadata to ask)
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    client = boto3.session.Session().client("bedrock-runtime", region_name="us-east-1")

    # When a Bedrock step runs
    # Then the error says how to give the function credentials
    with pytest.raises(ProviderNotAvailableError, match="configure AWS credentials"):
        LLMRegistry(bedrock_client_factory=lambda timeout: client).invoke(_request())


def test_bedrock_without_the_sdk_is_provider_not_available(monkeypatch: pytest.MonkeyPatch) -> None:
    # Given langchain-aws cannot be imported
    monkeypatch.setitem(sys.modules, "langchain_aws", None)

    # When a Bedrock step runs
    # Then the error says what to install
    with pytest.raises(ProviderNotAvailableError, match=r"pip install 'langorch\[bedrock\]'"):
        LLMRegistry().invoke(_request())
