"""Small CKP procedures for tests, compiled and run on LangGraph in memory (no AWS, no stack).

``procedure(...)`` writes a document as a seed 001 reader would; ``compiled(...)`` loads it the
way ``workflows put`` does; ``Runner`` runs it with an in-memory checkpointer and whatever
context the test gives (agents, secrets, an LLM), resuming approvals with a decision.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command

from langorch.domain.definitions import TaskPlan
from langorch.domain.loading import parse_definitions
from langorch.domain.lookup import InMemoryLookup
from langorch.engine.compiler import GraphCompiler
from langorch.engine.context import EngineContext


def procedure(start: str, nodes: dict[str, Any], **fields: Any) -> dict[str, Any]:
    """A procedure document with these nodes (``procedure_id`` ``p`` unless given)."""
    return {
        "procedure_id": "p",
        "version": "1.0.0",
        "status": "active",
        **fields,
        "workflow_graph": {"start_node": start, "nodes": nodes},
    }


def compiled(document: dict[str, Any]) -> TaskPlan:
    """The plan ``workflows put`` would store (raises ``DefinitionError`` as it would)."""
    return parse_definitions(document, source="test").workflows[0]


class NoLLM:
    """For procedures without an llm_action: any model call is a test failure."""

    def invoke(self, request: Any) -> Any:
        raise AssertionError("no node of this procedure calls an LLM")


@dataclass
class Runner:
    """Runs one procedure in memory; ``state`` is the graph's state after the last call."""

    document: dict[str, Any]
    others: list[dict[str, Any]] = field(default_factory=list)
    """Procedures its subflows run."""
    context: dict[str, Any] = field(default_factory=dict)
    """``EngineContext`` fields beside the run's identity (``llm``, ``actions``, …)."""
    events: list[dict[str, Any]] = field(default_factory=list)
    state: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.plan = compiled(self.document)
        workflows = [self.plan, *(compiled(d) for d in self.others)]
        self.compiler = GraphCompiler(InMemoryLookup(workflows=workflows), InMemorySaver())
        self.graph = self.compiler.compile(self.plan)
        self.config = {"configurable": {"thread_id": "r1"}}

    def _context(self) -> EngineContext:
        fields: dict[str, Any] = {"llm": NoLLM(), **self.context}
        return EngineContext(
            run_id="r1",
            workflow_id=self.plan.plan_id,
            workflow_version=1,
            user_id="u",
            subflows=self.compiler.subflow,
            **fields,
        )

    def start(self, **inputs: Any) -> dict[str, Any]:
        """Run from the start with these inputs until the end or an interrupt."""
        return self._go({"run_id": "r1", "shared_context": inputs})

    def resume(self, decision: str, **answer: Any) -> dict[str, Any]:
        """Answer the pending approval and go on."""
        return self._go(Command(resume={"decision": decision, **answer}))

    def wake(self) -> dict[str, Any]:
        """Wake a run parked on a full resource (it asks for the resource again)."""
        return self._go(Command(resume={"woken": True}))

    def _go(self, value: Any) -> dict[str, Any]:
        async def go() -> None:
            async for mode, chunk in self.graph.astream(
                value, self.config, context=self._context(), stream_mode=["custom", "values"]
            ):
                if mode == "custom":
                    self.events.append(chunk)
                else:
                    self.state = chunk

        asyncio.run(go())
        return self.state

    @property
    def shared(self) -> dict[str, Any]:
        """The run's variables."""
        return dict(self.state.get("shared_context") or {})

    @property
    def path(self) -> list[str]:
        """The steps that finished, in order."""
        return [r["step_id"] for r in self.state.get("block_results") or []]

    @property
    def interrupted(self) -> bool:
        """Whether the run waits on an approval."""
        return bool(self.graph.get_state(self.config).next)

    def calls(self) -> list[tuple[str, str, str]]:
        """``(node, executor.action, outcome)`` of every action performed."""
        return [
            (e["step_id"], e["tool"], e["outcome"])
            for e in self.events
            if e.get("event") == "tool_called"
        ]
