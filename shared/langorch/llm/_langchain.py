"""The call flow shared by the LangChain-backed providers (Bedrock, OpenAI).

1. With tools: bind them and let the model call them for at most :data:`MAX_TOOL_ROUNDS`
   rounds, running each call here.
2. Ask for the structured answer with ``with_structured_output(..., include_raw=True)`` so the
   raw message, and with it ``usage_metadata``, stays available.

The tool exchange is handed to step 2 as text appended to the prompt rather than as tool-call
messages: a structured-output call binds a different tool set (Bedrock) or none (OpenAI's
``response_format``), and providers reject tool-call history whose tools are not bound.

LangChain is imported inside the functions: this module is loaded only by a real provider.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from langorch.domain.errors import LLMError
from langorch.llm.base import LLMCallError, LLMRequest, LLMResult
from langorch.llm.schema import output_schema
from langorch.llm.tools import build_tools

MAX_TOOL_ROUNDS = 3
"""Tool-call rounds before the model must answer: bounds cost and a model stuck in a loop."""

MAX_TOOL_OUTPUT_CHARS = 4_000
"""Tool output kept in the prompt; http_get alone may return 100 KB."""

Translate = Callable[[Exception], LLMError]
"""Turns a provider SDK exception into a (possibly retryable) :class:`LLMError`."""


@dataclass
class Answer:
    """The structured answer of one request and the tokens all its calls used."""

    outputs: dict[str, Any]
    input_tokens: int = 0
    output_tokens: int = 0

    def count(self, message: Any) -> None:
        """Add the ``usage_metadata`` of a LangChain message (absent means zero)."""
        usage = getattr(message, "usage_metadata", None) or {}
        self.input_tokens += int(usage.get("input_tokens", 0))
        self.output_tokens += int(usage.get("output_tokens", 0))


def answer(
    chat: Any,
    request: LLMRequest,
    *,
    structured_options: dict[str, Any],
    translate: Translate,
    provider_label: str,
) -> Answer:
    """Run the tool rounds (if any) and the structured-output call.

    Args:
        chat: A LangChain chat model.
        request: The call to make.
        structured_options: Extra ``with_structured_output`` arguments (``method``, ``strict``).
        translate: Maps the SDK's exceptions to :class:`LLMError`.
        provider_label: ``Bedrock`` or ``OpenAI``, for messages.

    Returns:
        The raw (unvalidated) outputs and the summed token usage.

    Raises:
        LLMError: The provider failed, or its answer does not parse.
    """
    from langchain_core.messages import BaseMessage, HumanMessage, SystemMessage

    preamble: list[BaseMessage] = []
    if request.system_prompt:
        preamble.append(SystemMessage(request.system_prompt))
    result = Answer(outputs={})
    prompt = request.prompt
    if request.tools:
        transcript = _tool_rounds(chat, request, preamble, result, translate)
        if transcript:
            prompt = f"{prompt}\n\n{transcript}"

    structured = chat.with_structured_output(
        output_schema(request), include_raw=True, **structured_options
    )
    try:
        reply = structured.invoke([*preamble, HumanMessage(prompt)])
    except LLMError:
        raise
    except Exception as exc:
        raise translate(exc) from exc
    raw = reply.get("raw")
    result.count(raw)
    parsed, error = reply.get("parsed"), reply.get("parsing_error")
    where = f"{provider_label} answer for step {request.step_id!r}"
    if error is not None:
        raise LLMCallError(
            f"{where} does not parse as the output schema: {error}", retryable=True
        ) from error
    if parsed is None:
        refusal = getattr(raw, "additional_kwargs", {}).get("refusal")
        if refusal:
            raise LLMCallError(f"{where}: the model refused: {refusal}")
        raise LLMCallError(f"{where}: no structured answer came back", retryable=True)
    result.outputs = dict(parsed)
    return result


def _tool_rounds(
    chat: Any, request: LLMRequest, preamble: list[Any], result: Answer, translate: Translate
) -> str:
    """Let the model call its tools; return what happened as text for the answer prompt."""
    from langchain_core.messages import HumanMessage, ToolMessage

    tools = {tool.name: tool for tool in build_tools(request.tools)}
    bound = chat.bind_tools(list(tools.values()))
    conversation: list[Any] = [*preamble, HumanMessage(request.prompt)]
    lines: list[str] = []
    notes = ""
    for _ in range(MAX_TOOL_ROUNDS):
        try:
            message = bound.invoke(conversation)
        except LLMError:
            raise
        except Exception as exc:
            raise translate(exc) from exc
        result.count(message)
        if not message.tool_calls:
            notes = str(message.text).strip()
            break
        conversation.append(message)
        for call in message.tool_calls:
            output = _run_tool(tools, call["name"], call["args"])
            conversation.append(ToolMessage(output, tool_call_id=call["id"], name=call["name"]))
            lines.append(
                f"- {call['name']}({json.dumps(call['args'], sort_keys=True)}) -> {output}"
            )
    parts = []
    if lines:
        parts.append("Results of the tools you called:\n" + "\n".join(lines))
    if notes:
        parts.append(f"Your notes after using the tools:\n{notes}")
    return "\n\n".join(parts)


def _run_tool(tools: dict[str, Any], name: str, args: dict[str, Any]) -> str:
    tool = tools.get(name)
    if tool is None:
        return f"error: no tool named {name!r}"
    try:
        output = str(tool.invoke(args))
    except Exception as exc:
        # A failing tool is information for the model (bad URL, bad expression), not a
        # reason to fail the step.
        return f"error: {exc}"
    if len(output) > MAX_TOOL_OUTPUT_CHARS:
        output = output[:MAX_TOOL_OUTPUT_CHARS] + " [truncated]"
    return output


class ChatProvider:
    """What Bedrock and OpenAI share: a chat model per (model, temperature), built on first
    use, and one structured-answer call. Subclasses build the model and say how to ask."""

    name = "chat"
    label = "chat"

    def __init__(self, default_model: str) -> None:
        self._default_model = default_model
        self._models: dict[tuple[str, float | None], Any] = {}
        self._lock = threading.Lock()

    def invoke(self, request: LLMRequest) -> LLMResult:
        """Answer ``request`` with exactly the block's output keys."""
        model = request.model or self._default_model
        chat = self._chat(model, request.temperature)
        result = answer(
            chat,
            request,
            structured_options=self._structured_options(request),
            translate=self._translate,
            provider_label=self.label,
        )
        return LLMResult(
            outputs=result.outputs,
            provider=self.name,
            model=model,
            input_tokens=result.input_tokens,
            output_tokens=result.output_tokens,
        )

    def _chat(self, model: str, temperature: float | None) -> Any:
        key = (model, temperature)
        with self._lock:
            if key not in self._models:
                self._models[key] = self._new_chat(model, temperature)
            return self._models[key]

    def _new_chat(self, model: str, temperature: float | None) -> Any:
        raise NotImplementedError

    def _structured_options(self, request: LLMRequest) -> dict[str, Any]:
        raise NotImplementedError

    def _translate(self, exc: Exception) -> LLMError:
        raise NotImplementedError
