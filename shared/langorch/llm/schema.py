"""Structured output: the JSON schema of a step's answer, and checking an answer against it.

Both are plain Python over :class:`~langorch.llm.base.LLMRequest`, shared by every provider, so
an offline answer and a Bedrock answer are held to the same contract.
"""

from __future__ import annotations

import math
from typing import Any

from langorch.domain.errors import JsonShapeError, JsonSyntaxError
from langorch.domain.limits import check_json_shape, loads_strict
from langorch.llm.base import BRANCH_KEY, OUTPUT_TYPES, LLMCallError, LLMRequest

ANSWER_SCHEMA_NAME = "answer"
"""Name of the structured-output schema (the tool name on tool-calling providers)."""

_SCALAR_TYPES = frozenset({"string", "number", "integer", "boolean"})


def output_schema(request: LLMRequest) -> dict[str, Any]:
    """The JSON schema of the answer ``request`` asks for.

    Every answer key is a required property; ``branch`` is an enum of the choices.

    Args:
        request: The call being made.

    Returns:
        A JSON-Schema object with ``title`` and ``description`` (LangChain turns those into the
        tool or response-format name).

    Raises:
        LLMCallError: An output type is not one of the six JSON types.
    """
    properties: dict[str, Any] = {}
    for key in request.answer_keys():
        if key == BRANCH_KEY and request.choices is not None:
            properties[key] = {
                "type": "string",
                "enum": list(request.choices),
                "description": "The chosen label: exactly one of " + ", ".join(request.choices),
            }
            continue
        kind = request.type_of(key)
        if kind not in OUTPUT_TYPES:
            raise LLMCallError(
                f"step {request.step_id!r}: output_types[{key!r}] is {kind!r}; "
                f"use one of {', '.join(sorted(OUTPUT_TYPES))}"
            )
        prop: dict[str, Any] = {"type": kind}
        if kind == "array":
            # The block does not say what the items are; an empty schema accepts any item.
            prop["items"] = {}
        properties[key] = prop
    return {
        "title": ANSWER_SCHEMA_NAME,
        "description": "Your final answer. Fill every field.",
        "type": "object",
        "properties": properties,
        "required": list(properties),
        "additionalProperties": False,
    }


def is_strict_compatible(request: LLMRequest) -> bool:
    """Whether the answer schema fits OpenAI's strict structured outputs.

    Strict mode needs every object fully described; a free-form ``object`` or an ``array`` of
    unknown items is not, so such blocks fall back to non-strict (validated here instead).
    """
    return all(request.type_of(key) in _SCALAR_TYPES for key in request.answer_keys())


def validate_outputs(request: LLMRequest, outputs: Any) -> dict[str, Any]:
    """Check an answer against ``request`` and coerce values where that is safe.

    Safe coercions: numbers and booleans to strings, numeric strings to numbers, whole floats
    to integers, ``"true"``/``"false"`` to booleans, JSON text to arrays or objects, and a
    branch label differing only in case or surrounding spaces to the declared label.
    ``None`` (JSON ``null``) is kept as is.

    Args:
        request: The call that produced the answer.
        outputs: The provider's answer.

    Returns:
        Exactly the answer keys, in order; extra keys are dropped.

    Raises:
        LLMCallError: The answer is not a mapping, a key is missing, a value cannot be coerced
            to its type, the branch is not one of the choices, or a value nests deeper than
            ``MAX_JSON_DEPTH`` or is not strict JSON (NaN, Infinity, a lone surrogate). Marked
            ``retryable``: a sampled model may answer correctly on the next attempt.
    """
    where = f"step {request.step_id!r}"
    if not isinstance(outputs, dict):
        raise LLMCallError(
            f"{where}: the answer is a {type(outputs).__name__}, not an object", retryable=True
        )
    missing = [key for key in request.answer_keys() if key not in outputs]
    if missing:
        raise LLMCallError(
            f"{where}: the answer has no {', '.join(repr(k) for k in missing)} "
            f"(expected keys: {', '.join(request.answer_keys())})",
            retryable=True,
        )
    result: dict[str, Any] = {}
    try:
        for key in request.answer_keys():
            value = outputs[key]
            if key == BRANCH_KEY and request.choices is not None:
                result[key] = _branch(where, value, request.choices)
            elif value is None:
                result[key] = None
            else:
                result[key] = _coerce(where, key, value, request.type_of(key))
        # The answer joins the run's state: the shape every door keeps (providers' SDKs parse
        # NaN and any depth, and a model can nest a JSON string ever deeper).
        check_json_shape(result, "answer")
    except JsonShapeError as exc:
        raise LLMCallError(f"{where}: {exc}", retryable=True) from None
    return result


def _branch(where: str, value: Any, choices: list[str]) -> str:
    allowed = ", ".join(repr(c) for c in choices)
    if isinstance(value, str):
        if value in choices:
            return value
        folded = [c for c in choices if c.casefold() == value.strip().casefold()]
        # Only a unique match is safe: two labels differing in case must stay distinct.
        if len(folded) == 1:
            return folded[0]
    raise LLMCallError(
        f"{where}: branch {value!r} is not one of the allowed labels: {allowed}", retryable=True
    )


def _coerce(where: str, key: str, value: Any, kind: str) -> Any:
    coerced = _try_coerce(value, kind)
    if coerced is _FAIL:
        raise LLMCallError(
            f"{where}: {key!r} should be {_article(kind)} {kind}, got {type(value).__name__} "
            f"{_preview(value)}",
            retryable=True,
        )
    return coerced


_FAIL = object()


def _try_coerce(value: Any, kind: str) -> Any:
    if kind == "string":
        if isinstance(value, str):
            return value
        if isinstance(value, bool):
            return "true" if value else "false"
        if isinstance(value, int | float):
            return str(value)
        return _FAIL
    if kind == "boolean":
        if isinstance(value, bool):
            return value
        if isinstance(value, str) and value.strip().lower() in {"true", "false"}:
            return value.strip().lower() == "true"
        return _FAIL
    if kind == "integer":
        # bool is an int subclass; True is not a count.
        if isinstance(value, bool):
            return _FAIL
        if isinstance(value, int):
            return value
        if isinstance(value, float) and value.is_integer():
            return int(value)
        if isinstance(value, str):
            try:
                return int(value.strip())
            except ValueError:
                return _FAIL
        return _FAIL
    if kind == "number":
        if isinstance(value, bool):
            return _FAIL
        if isinstance(value, int | float):
            return value
        if isinstance(value, str):
            try:
                number = float(value.strip())
            except ValueError:
                return _FAIL
            return number if math.isfinite(number) else _FAIL
        return _FAIL
    container = list if kind == "array" else dict
    if isinstance(value, container):
        return value
    if isinstance(value, str):
        try:
            parsed = loads_strict(value, "answer")
        except JsonSyntaxError:
            return _FAIL
        return parsed if isinstance(parsed, container) else _FAIL
    return _FAIL


def _article(kind: str) -> str:
    return "an" if kind[0] in "aeiou" else "a"


def _preview(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."
