"""The call flow shared by the LangChain-backed providers (Bedrock, OpenAI).

1. With tools: bind them and let the model call them for at most :data:`MAX_TOOL_ROUNDS`
   rounds, running each call here.
2. Ask for the structured answer (OpenAI: a JSON-schema response format; Bedrock: a forced
   ``answer`` tool) and read it ourselves: the stop reason first (refusal, guardrail, output
   limit), then the JSON, strictly. LangChain's structured-output parsers are not used: their
   partial-JSON repair turns an answer cut mid-value into a "valid" shorter one.

Every call is async (``ainvoke``): cancelling the step's task abandons the HTTP request
(OpenAI's httpx client closes the connection; Bedrock's botocore call is bounded by a read
timeout derived from the step's time, see ``bedrock.py``). The chat model of each request is
looked up when that request is sent, so a per-request setting (Bedrock's read timeout: what is
left of the step's time) is current for every round. Every billed response is counted, also
when the answer is then refused, so a failed attempt's tokens are not lost.

The tool exchange is handed to step 2 as text appended to the prompt rather than as tool-call
messages: a structured-output call binds a different tool set (Bedrock) or none (OpenAI's
``response_format``), and providers reject tool-call history whose tools are not bound.

LangChain is imported inside the functions: this module is loaded only by a real provider.
"""

from __future__ import annotations

import asyncio
import json
import threading
import weakref
from collections.abc import Callable, Hashable
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any

from langorch.domain.errors import JsonInputError, LLMError
from langorch.domain.limits import loads_strict
from langorch.llm.base import LLMCallError, LLMRequest, LLMResult
from langorch.llm.builtin_tools import build_tools
from langorch.llm.errors import malformed

MAX_TOOL_ROUNDS = 3
"""Tool-call rounds before the model must answer: bounds cost and a model stuck in a loop."""

MAX_TOOL_OUTPUT_CHARS = 4_000
"""Tool output kept in the prompt; http_get alone may return 100 KB."""


@dataclass
class Tally:
    """Tokens billed so far: per request (:class:`Answer`) or per step attempt (``calls.py``),
    and, per attempt, its HTTP requests still open (``request_opened``/``request_closed``)."""

    input_tokens: int = 0
    output_tokens: int = 0
    open_requests: int = field(default=0, compare=False)
    _settled: threading.Condition = field(
        default_factory=threading.Condition, compare=False, repr=False
    )
    _abandoned: bool = field(default=False, compare=False, repr=False)

    def add(self, input_tokens: int, output_tokens: int) -> None:
        """Add one response's usage."""
        self.input_tokens += input_tokens
        self.output_tokens += output_tokens

    def request_opened(self) -> None:
        """A request of this attempt is about to be sent.

        Raises:
            AttemptAbandonedError: the attempt was given up (its deadline passed while the
                SDK's thread was still on its way to sending): the request is not sent.
        """
        with self._settled:
            if self._abandoned:
                raise AttemptAbandonedError("the step's attempt was given up before this request")
            self.open_requests += 1

    def request_closed(self) -> None:
        """A request of this attempt ended (answered, failed or timed out: its connection is
        closed or back in the pool)."""
        with self._settled:
            self.open_requests -= 1
            self._settled.notify_all()

    def abandon(self) -> bool:
        """Send no further request for this attempt.

        Returns:
            Whether a request of it is still open.
        """
        with self._settled:
            self._abandoned = True
            return self.open_requests > 0

    def wait_closed(self, seconds: float) -> bool:
        """Block until no request of this attempt is open, at most ``seconds``.

        Returns:
            Whether none is open.
        """
        with self._settled:
            return self._settled.wait_for(lambda: self.open_requests <= 0, seconds)


class AttemptAbandonedError(Exception):
    """A request was about to leave for a step attempt already given up (not sent)."""


ATTEMPT_TALLY: ContextVar[Tally | None] = ContextVar("langorch_llm_attempt_tally", default=None)
"""Set by :func:`langorch.llm.calls.call_model` so tokens of an abandoned call are kept."""


@dataclass
class Answer(Tally):
    """The structured answer of one request and the tokens all its calls used."""

    outputs: dict[str, Any] | None = None

    def add(self, input_tokens: int, output_tokens: int) -> None:
        """Add usage here and to the running attempt's tally (if any)."""
        super().add(input_tokens, output_tokens)
        attempt = ATTEMPT_TALLY.get()
        if attempt is not None:
            attempt.add(input_tokens, output_tokens)

    def count(self, message: Any) -> tuple[int, int]:
        """Add the ``usage_metadata`` of a LangChain message (absent means zero)."""
        usage = getattr(message, "usage_metadata", None) or {}
        tokens = (int(usage.get("input_tokens", 0)), int(usage.get("output_tokens", 0)))
        self.add(*tokens)
        return tokens


class ChatProvider:
    """What Bedrock and OpenAI share: chat models built on first use, one answer flow.

    Subclasses load their SDK (:meth:`prepare`, before a step's time starts), build the chat
    model and say how to ask for, and how to read, the answer. Chat models are cached per event
    loop: an async HTTP client belongs to the loop that opened its connections, and each Lambda
    invocation (each ``asyncio.run``) brings a new one.
    """

    name = "chat"
    label = "chat"

    def __init__(self, default_model: str) -> None:
        self._default_model = default_model
        self._models: dict[Hashable, Any] = {}
        self._loop: weakref.ref[asyncio.AbstractEventLoop] | None = None
        self._lock = threading.Lock()
        self._warming = threading.Lock()
        """Held while the first chat model is built (not ``_lock``: requests in the event loop
        look their models up under that one, and must not wait for a warm-up)."""
        self._warm = False

    @property
    def default_model(self) -> str:
        """The model used when a request names none."""
        return self._default_model

    def prepare(self, seconds: float | None = None) -> None:
        """Load the SDK and the key, and build a first chat model, outside any step's time.

        The first chat model built in a process loads more of its SDK (the HTTP stack, model
        profiles): half a second to a second on a busy host. It is built once here and thrown
        away; the models requests use are built in their event loop, in milliseconds.

        Args:
            seconds: What the step's first call will have (``None``: no step limit).

        Raises:
            ProviderUnavailableError: the SDK or the key is missing.
        """
        self._prepare_for(seconds)
        with self._warming:
            if not self._warm:
                request = _warm_up_request(self, seconds)
                self._new_chat(self.resolve_model(self._default_model), request)
                self._warm = True

    def invoke(self, request: LLMRequest) -> LLMResult:
        """Answer ``request`` from synchronous code (scripts, tests): runs :meth:`ainvoke`."""
        return asyncio.run(self.ainvoke(request))

    async def ainvoke(self, request: LLMRequest) -> LLMResult:
        """Answer ``request`` with exactly the block's output keys (validated by the registry).

        Raises:
            LLMError: a named failure (:mod:`langorch.llm.errors`) or the provider's error,
                carrying the tokens the failed calls were billed for.
        """
        model = self.resolve_model(request.model or self._default_model)
        result = Answer()
        try:
            await self._answer(request, result)
        except LLMCallError as exc:
            exc.input_tokens = max(exc.input_tokens, result.input_tokens)
            exc.output_tokens = max(exc.output_tokens, result.output_tokens)
            raise
        return LLMResult(
            outputs=result.outputs or {},
            provider=self.name,
            model=model,
            input_tokens=result.input_tokens,
            output_tokens=result.output_tokens,
        )

    async def _answer(self, request: LLMRequest, result: Answer) -> None:
        from langchain_core.messages import BaseMessage, HumanMessage, SystemMessage

        preamble: list[BaseMessage] = []
        if request.system_prompt:
            preamble.append(SystemMessage(request.system_prompt))
        prompt = request.prompt
        if request.toolbox is not None:
            transcript = await self._toolbox_rounds(request, preamble, result)
            if transcript:
                prompt = f"{prompt}\n\n{transcript}"
        elif request.tools:
            transcript = await self._tool_rounds(request, preamble, result)
            if transcript:
                prompt = f"{prompt}\n\n{transcript}"
        raw = await self._call(
            lambda chat: self._structured(chat, request),
            [*preamble, HumanMessage(prompt)],
            request,
            result,
        )
        tokens = result.count(raw)
        self._check_stop(raw, request, tokens)
        result.outputs = self._outputs(raw, request, tokens)

    async def _call(
        self,
        shape: Callable[[Any], Any],
        messages: list[Any],
        request: LLMRequest,
        result: Answer,
    ) -> Any:
        """Send one request: ``shape`` makes the runnable (tools bound, structured output) of
        the chat model this request gets, looked up now."""
        try:
            return await shape(self._chat(request)).ainvoke(messages)
        except LLMError:
            raise
        except Exception as exc:
            raise self._translate(exc, request, result) from exc

    async def _tool_rounds(self, request: LLMRequest, preamble: list[Any], result: Answer) -> str:
        """Let the model call its tools; return what happened as text for the answer prompt."""
        from langchain_core.messages import HumanMessage, ToolMessage

        tools = {tool.name: tool for tool in build_tools(request.tools)}

        def bound(chat: Any) -> Any:
            return chat.bind_tools(list(tools.values()))

        conversation: list[Any] = [*preamble, HumanMessage(request.prompt)]
        lines: list[str] = []
        notes = ""
        for _ in range(MAX_TOOL_ROUNDS):
            message = await self._call(bound, conversation, request, result)
            self._check_stop(message, request, result.count(message))
            if not message.tool_calls:
                notes = str(message.text).strip()
                break
            conversation.append(message)
            for call in message.tool_calls:
                # Tools block (http_get waits up to 10 s): keep the event loop free.
                output = await asyncio.to_thread(_run_tool, tools, call["name"], call["args"])
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

    async def _toolbox_rounds(
        self, request: LLMRequest, preamble: list[Any], result: Answer
    ) -> str:
        """:meth:`_tool_rounds` through the step's toolbox: bound built-in and MCP tools, calls
        bounded per step, each model round and tool call recorded (a replay repeats neither)."""
        from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

        from langorch.domain.tasks import fingerprint

        toolbox = request.toolbox
        specs = await toolbox.specs()
        tools = [spec.as_openai_tool() for spec in specs]

        def bound(chat: Any) -> Any:
            return chat.bind_tools(tools) if tools else chat

        conversation: list[Any] = [*preamble, HumanMessage(request.prompt)]
        lines: list[str] = []
        notes = ""
        for number in range(toolbox.max_calls + 1):

            async def ask(messages: list[Any] = conversation) -> dict[str, Any]:
                message = await self._call(bound, messages, request, result)
                self._check_stop(message, request, result.count(message))
                return {
                    "text": message_text(message),
                    "tool_calls": [
                        {"name": c["name"], "args": c["args"], "id": c["id"]}
                        for c in message.tool_calls
                    ],
                }

            turn = await toolbox.turn(fingerprint("turn", number, request.prompt), ask)
            calls = turn.get("tool_calls") or []
            if not calls:
                notes = str(turn.get("text") or "")
                break
            conversation.append(AIMessage(content=turn.get("text") or "", tool_calls=calls))
            for call in calls:
                output = await toolbox.call(call["name"], call["args"])
                conversation.append(ToolMessage(output, tool_call_id=call["id"], name=call["name"]))
                lines.append(
                    f"- {call['name']}({json.dumps(call['args'], sort_keys=True)}) -> {output}"
                )
            if toolbox.exhausted:
                break
        parts = []
        if lines:
            parts.append("Results of the tools you called:\n" + "\n".join(lines))
        if notes:
            parts.append(f"Your notes after using the tools:\n{notes}")
        return "\n\n".join(parts)

    def _chat(self, request: LLMRequest) -> Any:
        model = self.resolve_model(request.model or self._default_model)
        key = self._chat_key(model, request)
        loop = asyncio.get_running_loop()
        with self._lock:
            if self._loop is None or self._loop() is not loop:
                self._models.clear()
                self._loop = weakref.ref(loop)
            if key not in self._models:
                self._models[key] = self._new_chat(model, request)
            return self._models[key]

    # --- What subclasses say -----------------------------------------------------------------

    def resolve_model(self, model: str) -> str:
        """The model id actually sent (Bedrock adds an inference-profile prefix)."""
        return model

    def _chat_key(self, model: str, request: LLMRequest) -> Hashable:
        return (model, request.temperature, request.max_tokens)

    def _new_chat(self, model: str, request: LLMRequest) -> Any:
        raise NotImplementedError

    def _prepare_for(self, seconds: float | None) -> None:
        """What else a call with ``seconds`` needs before it starts (Bedrock: its client)."""

    def _structured(self, chat: Any, request: LLMRequest) -> Any:
        """The runnable that asks for the structured answer."""
        raise NotImplementedError

    def _check_stop(self, message: Any, request: LLMRequest, tokens: tuple[int, int]) -> None:
        """Raise the named error when the message stopped for a failure reason."""
        raise NotImplementedError

    def _outputs(self, raw: Any, request: LLMRequest, tokens: tuple[int, int]) -> dict[str, Any]:
        """The answer object read from the structured call's message."""
        raise NotImplementedError

    def _translate(self, exc: Exception, request: LLMRequest, result: Answer) -> LLMError:
        raise NotImplementedError


def _warm_up_request(provider: ChatProvider, seconds: float | None) -> LLMRequest:
    """A request that is never sent: what building a first chat model needs to know."""
    return LLMRequest(
        run_id="",
        step_id="warm-up",
        block_id=None,
        provider=provider.name,
        model=None,
        system_prompt="",
        prompt="",
        output_keys=[],
        timeout_seconds=seconds,
    )


def parse_json_object(
    text: str, request: LLMRequest, label: str, tokens: tuple[int, int]
) -> dict[str, Any]:
    """Strictly parse the answer text as one JSON object (no repair of a cut answer).

    Raises:
        MalformedOutputError: the text is not exactly one JSON object.
    """
    try:
        value = loads_strict(text, "answer")
    except JsonInputError as exc:
        raise malformed(request, label, f"invalid JSON ({exc})", text, tokens) from None
    if not isinstance(value, dict):
        raise malformed(
            request, label, f"a JSON {type(value).__name__}, not an object", text, tokens
        )
    return value


def message_text(message: Any) -> str:
    """The text a LangChain message carries (its content blocks joined)."""
    try:
        return str(message.text).strip()
    except Exception:  # an unusual content shape: fall back to the raw content
        return str(getattr(message, "content", "")).strip()


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


class LazyKey:
    """A provider's API key, given or read by a function at its first use (a secret read from
    Secrets Manager only when a step calls the provider), then kept.

    Args:
        source: the key, or a function returning it.
        missing: what a step is told when there is none: where to set it.
    """

    def __init__(self, source: Callable[[], str | None] | str | None, missing: str) -> None:
        self._source = source
        self._missing = missing
        self._key: str | None = None

    def __call__(self) -> str:
        """The key.

        Raises:
            ProviderUnavailableError: there is none.
        """
        if self._key is None:
            from langorch.llm.base import ProviderUnavailableError

            key = self._source() if callable(self._source) else self._source
            if not key:
                raise ProviderUnavailableError(self._missing)
            self._key = key
        return self._key
