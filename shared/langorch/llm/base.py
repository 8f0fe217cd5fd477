"""The provider contract: what a step asks an LLM for and what comes back.

Kept free of any LLM SDK so that importing it costs nothing (ARCHITECTURE §2, cold starts).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from langorch.domain.errors import LLMError, ProviderNotAvailableError

OutputType = Literal["string", "number", "integer", "boolean", "array", "object"]
"""JSON type of one output key (``BlockDefinition.output_types``)."""

OUTPUT_TYPES: frozenset[str] = frozenset(
    {"string", "number", "integer", "boolean", "array", "object"}
)

BRANCH_KEY = "branch"
"""Output key that carries a decision's label."""


@dataclass(frozen=True)
class LLMRequest:
    """One structured-output call for one step of one run.

    Attributes:
        run_id: The run the call belongs to (for logs and token metrics).
        step_id: The plan step making the call.
        block_id: The block the step references, if any.
        provider: ``"offline"``, ``"bedrock"``, ``"openai"`` or ``"anthropic"``; empty means the
            registry default.
        model: Provider model id; ``None`` means the provider's (or registry's) default.
        system_prompt: System message; may be empty.
        prompt: The rendered user prompt.
        output_keys: Keys the answer must contain.
        output_types: JSON type per key; keys not listed are strings.
        choices: Decision labels; when given the answer's ``branch`` must be one of them.
        temperature: Sampling temperature; ``None`` means the provider default.
        tools: Names from :data:`langorch.llm.builtin_tools.KNOWN_TOOLS` the model may call.
        call_index: How many times this step ran before in this run (0-based).
        attempt: 1-based retry attempt of this call.
        max_tokens: Output token limit; ``None`` means the registry's default, else the
            provider's.
        timeout_seconds: What is left of the step's time for this call (``None``: the
            provider's own request timeout). Set by :func:`langorch.llm.calls.call_model`.
        deadline: The ``time.monotonic()`` by which the call must end (``None``: no step
            limit). Set with ``timeout_seconds``; a provider whose timeout is fixed per HTTP
            client (Bedrock) reads what is left of it when it sends each request.
        max_attempts: How many attempts the step makes in all (for messages: "will retry").
        toolbox: The step's bound tools (a :class:`langorch.llm.toolbox.Toolbox`): calls to
            them are bounded and recorded. ``None``: a provider binds the built-in ``tools``
            itself.
    """

    run_id: str
    step_id: str
    block_id: str | None
    provider: str
    model: str | None
    system_prompt: str
    prompt: str
    output_keys: list[str]
    output_types: dict[str, str] = field(default_factory=dict)
    choices: list[str] | None = None
    temperature: float | None = None
    tools: list[str] = field(default_factory=list)
    call_index: int = 0
    attempt: int = 1
    max_tokens: int | None = None
    timeout_seconds: float | None = None
    deadline: float | None = None
    max_attempts: int = 1
    toolbox: Any = field(default=None, compare=False, repr=False)

    @property
    def subject(self) -> str:
        """The block id, else the step id: what deterministic answers are derived from."""
        return self.block_id or self.step_id

    def answer_keys(self) -> list[str]:
        """The keys the answer must carry: the output keys, plus ``branch`` for decisions."""
        keys = list(self.output_keys)
        if self.choices is not None and BRANCH_KEY not in keys:
            keys.append(BRANCH_KEY)
        return keys

    def type_of(self, key: str) -> str:
        """The JSON type expected for ``key`` (``string`` unless declared)."""
        if key == BRANCH_KEY and self.choices is not None:
            return "string"
        return self.output_types.get(key, "string")


@dataclass(frozen=True)
class LLMResult:
    """A validated answer.

    Attributes:
        outputs: Exactly the request's output keys (plus ``branch`` when choices were given).
        provider: The provider that answered.
        model: The model that answered.
        input_tokens: Prompt tokens billed (an estimate for the offline provider).
        output_tokens: Completion tokens billed (an estimate for the offline provider).
    """

    outputs: dict[str, Any]
    provider: str
    model: str
    input_tokens: int
    output_tokens: int


class LLMProvider(Protocol):
    """Something that answers an :class:`LLMRequest` with structured output."""

    name: str

    def prepare(self, seconds: float | None = None) -> None:
        """Load what a call needs (the SDK, the key, a client), before a step's time starts.

        Args:
            seconds: What the step's first call will have (``None``: no step limit).

        Raises:
            ProviderNotAvailableError: the SDK or the key is missing.
        """
        ...

    def invoke(self, request: LLMRequest) -> LLMResult:
        """Answer ``request``; raise :class:`LLMError` on failure."""
        ...

    async def ainvoke(self, request: LLMRequest) -> LLMResult:
        """Answer ``request`` in the running event loop; cancelling it abandons the call."""
        ...


class LLMCallError(LLMError):
    """An LLM call failed; ``retryable`` says whether trying again may help.

    Retryable: throttling, 5xx answers, timeouts and dropped connections, and an answer that
    does not parse or does not fit the block (a sampled model may well answer correctly on the
    next attempt). Not retryable: a bad request, a refusal, an unknown provider, tool or
    output type. The named kinds (refusal, guardrail, cut-off, throttling, timeout) are in
    :mod:`langorch.llm.errors`.

    Attributes:
        retryable: Whether another attempt may succeed.
        input_tokens: Prompt tokens billed for the failed attempt (0 when none or unknown).
        output_tokens: Completion tokens billed for the failed attempt.
    """

    def __init__(
        self,
        message: str,
        *,
        retryable: bool = False,
        input_tokens: int = 0,
        output_tokens: int = 0,
    ) -> None:
        super().__init__(message)
        self.retryable = retryable
        self.input_tokens = input_tokens
        self.output_tokens = output_tokens

    @property
    def tokens(self) -> dict[str, int] | None:
        """``{"input": n, "output": m}`` the failed call was billed for, else ``None``."""
        if not (self.input_tokens or self.output_tokens):
            return None
        return {"input": self.input_tokens, "output": self.output_tokens}


class ProviderUnavailableError(ProviderNotAvailableError):
    """A provider's SDK, key or credentials are missing or refused: never worth a retry.

    The engine retries errors that carry no ``retryable`` mark, so this one carries
    ``retryable = False``; catch it as :class:`ProviderNotAvailableError`.
    """

    retryable = False


def is_retryable(exc: BaseException) -> bool:
    """Whether ``exc`` is marked as worth retrying (``retryable=True``)."""
    return bool(getattr(exc, "retryable", False))
