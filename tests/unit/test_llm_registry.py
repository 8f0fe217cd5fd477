"""The registry: provider resolution, tools, and the checks every answer goes through."""

from __future__ import annotations

from functools import partial
from typing import Any

import pytest

from langorch.domain.errors import LLMError
from langorch.llm import KNOWN_PROVIDERS, KNOWN_TOOLS, LLMRegistry, is_retryable
from langorch.llm.schema import output_schema, validate_outputs
from tests.support.llm import an_llm_request

_request = partial(
    an_llm_request,
    step_id="extract",
    block_id="extract_invoice",
    provider="",
    prompt="Read the invoice.",
    output_keys=["total"],
    output_types={"total": "number"},
)


def test_known_providers_and_tools_are_published() -> None:
    # Then validation has the names to check blocks against
    assert {"offline", "bedrock", "openai", "anthropic"} == KNOWN_PROVIDERS
    assert {"calculator", "current_time", "http_get"} <= KNOWN_TOOLS


def test_the_known_tools_are_the_tools_langorch_builds() -> None:
    from langorch.llm.builtin_tools import TOOL_FACTORIES

    # Then the names validation accepts (read without building a tool) are those it can build
    assert frozenset(TOOL_FACTORIES) == KNOWN_TOOLS


def test_empty_provider_uses_the_default_with_its_default_model() -> None:
    # Given a registry defaulting to offline with a default model
    registry = LLMRegistry(default_provider="offline", default_model="house-model")

    # When a request names no provider and no model
    result = registry.invoke(_request())

    # Then the default provider answers with the default model
    assert (result.provider, result.model) == ("offline", "house-model")


def test_default_model_is_not_applied_to_another_provider() -> None:
    # Given the default model belongs to Bedrock
    registry = LLMRegistry(default_provider="bedrock", default_model="anthropic.claude-x")

    # When an offline request names no model
    # Then the Bedrock model id is not carried over
    assert registry.invoke(_request(provider="offline")).model == "offline"


def test_unknown_provider_is_an_error_listing_the_known_ones() -> None:
    # When a request names a provider that does not exist
    # Then the error lists the known ones
    with pytest.raises(LLMError, match="bedrock, offline, openai"):
        LLMRegistry().invoke(_request(provider="gemini"))


def test_unknown_provider_is_not_worth_a_retry() -> None:
    # When a request names a provider that does not exist
    with pytest.raises(LLMError) as caught:
        LLMRegistry().invoke(_request(provider="gemini"))

    # Then the error is marked not retryable
    assert caught.value.retryable is False  # type: ignore[attr-defined]


def test_a_tool_nothing_binds_does_not_stop_an_offline_answer() -> None:
    # Given a request naming a tool no registry binds (seed 000's `browser`: accepted with a
    # warning at `put`; only a call to it fails a step)
    request = _request(tools=["browser"])
    # When the offline provider, which calls no tool, answers it
    result = LLMRegistry().invoke(request)
    # Then the block's outputs come back as for any request
    assert set(result.outputs) == {"total"}


def test_looking_up_a_real_provider_builds_it_once() -> None:
    # Given a registry
    registry = LLMRegistry()

    # When the bedrock provider is looked up twice
    # Then it is the same instance (its chat models are cached on it)
    assert registry.provider("bedrock") is registry.provider("bedrock")


def test_missing_key_is_an_error_naming_the_key() -> None:
    # Given an answer without the "total" key
    # When it is validated
    # Then the error names the key
    with pytest.raises(LLMError, match="no 'total'"):
        validate_outputs(_request(), {"sum": 3})


def test_answer_that_does_not_fit_is_worth_a_retry() -> None:
    # When a sampled answer misses a key
    with pytest.raises(LLMError) as caught:
        validate_outputs(_request(), {"sum": 3})

    # Then another attempt may do better
    assert is_retryable(caught.value)


def test_answer_that_is_not_an_object_is_an_error() -> None:
    with pytest.raises(LLMError, match="not an object"):
        validate_outputs(_request(), ["total", 3])


@pytest.mark.parametrize(
    ("kind", "given", "expected"),
    [
        ("number", "12.5", 12.5),
        ("integer", 3.0, 3),
        ("integer", " 7 ", 7),
        ("boolean", "True", True),
        ("string", 42, "42"),
        ("array", '["a", "b"]', ["a", "b"]),
        ("object", '{"a": 1}', {"a": 1}),
    ],
)
def test_safe_coercions_are_applied(kind: str, given: Any, expected: Any) -> None:
    # Given a value of a near type
    # When it is validated against its declared type
    outputs = validate_outputs(_request(output_types={"total": kind}), {"total": given})

    # Then it is coerced
    assert outputs == {"total": expected}


@pytest.mark.parametrize(
    ("kind", "given"),
    [
        ("integer", 2.5),
        ("integer", True),
        ("number", "twelve"),
        ("boolean", "yes"),
        ("array", "a,b"),
    ],
)
def test_unsafe_coercions_are_refused(kind: str, given: Any) -> None:
    # When a value cannot be safely read as its type
    # Then the error names the key and the type
    with pytest.raises(LLMError, match=f"'total' should be an? {kind}"):
        validate_outputs(_request(output_types={"total": kind}), {"total": given})


def test_branch_differing_only_in_case_is_read_as_the_label() -> None:
    # When the model answers "Approved " for the label "approved"
    outputs = validate_outputs(
        _request(output_keys=[], choices=["approved", "rejected"]), {"branch": "Approved "}
    )

    # Then the declared label is used
    assert outputs == {"branch": "approved"}


def test_extra_keys_are_dropped() -> None:
    # When an answer carries keys the block does not declare
    # Then only the declared keys are kept
    assert validate_outputs(_request(), {"total": 3, "note": "x"}) == {"total": 3}


def test_schema_rejects_an_unknown_output_type() -> None:
    # When a block declares a type that is not a JSON type
    # Then building the schema names the key and the allowed types
    with pytest.raises(LLMError, match=r"output_types\['total'\] is 'money'"):
        output_schema(_request(output_types={"total": "money"}))


def test_a_block_naming_anthropic_is_valid_like_the_other_providers() -> None:
    # Given seed 000's block naming the anthropic provider
    from langorch.domain.definitions import BlockDefinition
    from langorch.domain.validation import check_block

    block = BlockDefinition(
        block_id="b", output_keys=["x"], prompt_template="p", llm_provider="anthropic"
    )
    # When it is validated against the providers langorch has, then nothing is wrong
    assert check_block(block, tools=None, providers=KNOWN_PROVIDERS).errors == []
