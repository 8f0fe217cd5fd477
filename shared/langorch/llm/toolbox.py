"""What a provider's tool loop talks to: the step's bound tools, bounded and recorded.

A step with ``tools_required`` gets a :class:`Toolbox` on its :class:`~langorch.llm.LLMRequest`
(built by :mod:`langorch.app.step_tools`). The provider lists the tools to bind
(:meth:`Toolbox.specs`), records each model round (:meth:`Toolbox.turn`) and runs each tool the
model calls through :meth:`Toolbox.call`, which bounds the calls per step and the time per call,
returns a failing tool's error as text for the model, records every result so a replay does not
call again, and fails the step only when the model calls a tool the step has not bound.

Kept free of any SDK so that importing it costs nothing.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from langorch.llm.base import LLMCallError


class UnboundToolError(LLMCallError):
    """The model called a tool the step has not bound (unregistered, or not allowed).

    Never retryable: the same definition binds the same tools on the next attempt.
    """

    def __init__(self, message: str) -> None:
        super().__init__(message, retryable=False)


@dataclass(frozen=True)
class ToolSpec:
    """One tool as a model sees it.

    Attributes:
        name: What the model calls.
        description: What the tool does.
        parameters: The JSON schema of its arguments (an object schema).
    """

    name: str
    description: str
    parameters: dict[str, Any] = field(default_factory=lambda: {"type": "object"})

    def as_openai_tool(self) -> dict[str, Any]:
        """The OpenAI function-tool shape, which LangChain's ``bind_tools`` accepts for every
        provider."""
        return {
            "type": "function",
            "function": {
                "name": self.name,
                "description": self.description,
                "parameters": self.parameters,
            },
        }


class Toolbox(Protocol):
    """The tools of one attempt of one step."""

    @property
    def max_calls(self) -> int:
        """Tool calls the step may make in all."""
        ...

    @property
    def exhausted(self) -> bool:
        """Whether the step has used all its calls: the model must answer now."""
        ...

    async def specs(self) -> list[ToolSpec]:
        """The bound tools (built-in and registered MCP tools the step may call)."""
        ...

    async def call(self, name: str, args: dict[str, Any]) -> str:
        """Run one tool call (or replay its record); returns what the model is told.

        Raises:
            UnboundToolError: ``name`` is not bound for this step.
        """
        ...

    async def call_with_outcome(self, name: str, args: dict[str, Any]) -> tuple[str, str]:
        """:meth:`call`, with how it went: ``ok``, ``error``, ``timeout`` or ``refused``
        (a step's hook fails on anything but ``ok``; a model is only told the text).

        Raises:
            UnboundToolError: ``name`` is not bound for this step.
        """
        ...

    async def turn(
        self, digest: str, ask: Callable[[], Awaitable[dict[str, Any]]]
    ) -> dict[str, Any]:
        """One model round of the loop, recorded: ``{"text", "tool_calls": [...]}``."""
        ...
