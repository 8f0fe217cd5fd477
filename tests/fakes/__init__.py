"""In-memory fakes of langorch's ports, and :class:`Fakes`, a composition of them.

Each fake passes the same contract suite (``tests/contracts``) as the adapter it stands for.
:class:`Fakes` has the attributes the use-cases' dependency Protocols name, so a use-case test
passes it where the handlers pass the container.
"""

from __future__ import annotations

import copy
from functools import cached_property
from typing import TYPE_CHECKING, Any

from langgraph.store.memory import InMemoryStore

from langorch.adapters.mcp import McpConnection
from langorch.app.traces import NO_TRACES, RunTraces
from langorch.config import Settings
from langorch.domain.prices import PriceTable
from tests.fakes.agents import InMemoryAgents
from tests.fakes.approvals import InlineHandoff, RecordingApprovalTimers
from tests.fakes.artifacts import InMemoryArtifacts
from tests.fakes.budgets import InMemoryBudgetCounters
from tests.fakes.checkpoints import InMemoryCheckpoints
from tests.fakes.clock import T0, FakeClock, SequentialIds
from tests.fakes.definitions import InMemoryDefinitions
from tests.fakes.email import RecordingEmailSender
from tests.fakes.executions import STATE_MACHINE_ARN, InMemoryExecutions
from tests.fakes.files import InMemoryFiles
from tests.fakes.resources import InMemoryResourceLocks
from tests.fakes.runs import InMemoryRuns
from tests.fakes.schedules import InMemorySchedules
from tests.fakes.secrets import InMemorySecrets
from tests.fakes.tools import InMemoryTasks, InMemoryToolServers

if TYPE_CHECKING:
    from langorch.app.memory import MemoryManager
    from langorch.engine.compiler import GraphCompiler
    from langorch.engine.context import Downloader, HttpCaller
    from langorch.llm import LLMRegistry

__all__ = [
    "STATE_MACHINE_ARN",
    "T0",
    "FakeClock",
    "Fakes",
    "InMemoryAgents",
    "InMemoryCheckpoints",
    "InMemoryDefinitions",
    "InMemoryExecutions",
    "InMemoryFiles",
    "InMemoryResourceLocks",
    "InMemoryRuns",
    "InMemorySchedules",
    "InMemorySecrets",
    "InMemoryTasks",
    "InMemoryToolServers",
    "RecordingEmailSender",
    "SequentialIds",
]


class Fakes:
    """Every port with its in-memory fake, wired like the container wires the adapters.

    Args:
        script: the offline LLM's scripted answers.
        seed_builtins: store the built-in blocks (as the deployed stack does).
        http: what ``http`` steps call (``None``: such a step fails).
        download: what ``attach`` steps download with (``None``: a ``url`` file fails).
        settings: ``Settings`` fields (a state machine ARN is set unless given).
    """

    def __init__(
        self,
        script: dict[str, Any] | str | None = None,
        *,
        seed_builtins: bool = True,
        http: HttpCaller | None = None,
        download: Downloader | None = None,
        **settings: Any,
    ) -> None:
        from langorch.llm import LLMRegistry

        settings.setdefault("state_machine_arn", STATE_MACHINE_ARN)
        self.settings = Settings(**settings)
        self.runs = InMemoryRuns()
        self.resources = InMemoryResourceLocks()
        self.definitions = InMemoryDefinitions()
        self.executions = InMemoryExecutions(self.settings.state_machine_arn)
        self.secrets = InMemorySecrets()
        self.tool_servers = InMemoryToolServers()
        self.agents = InMemoryAgents()
        # Registered tools are reached through the real MCP client (tests start real servers).
        self.tool_connector = McpConnection
        self.tasks = InMemoryTasks()
        self.email = RecordingEmailSender()
        self.files = InMemoryFiles(self.settings.bucket, self.settings.checkpoint_prefix)
        self.artifacts = self.artifact_writer = InMemoryArtifacts()
        self.download = download
        self.schedules = InMemorySchedules(
            role_arn=self.settings.scheduler_role_arn,
            target_arn=self.settings.trigger_function_arn,
            dead_letter_arn=self.settings.schedule_dlq_arn,
        )
        self.clock = FakeClock()
        self.approval_timers = RecordingApprovalTimers()
        self.notifiers: dict[str, Any] = {}
        """Chat channels (``slack``): tests that post to one add its fake or adapter."""
        self.handoff = InlineHandoff()
        """Handed-on work runs at once, on the caller's thread (a test reads its outcome
        right after the request; tests of the hand-off itself swap the adapter in)."""
        self.ids = SequentialIds()
        self.checkpointer = InMemoryCheckpoints(self.runs)
        self.memory_store = InMemoryStore()
        self.llm: LLMRegistry = LLMRegistry(default_provider="offline", offline_script=script)
        self.http = http
        self.prices = PriceTable.shipped()
        self.budgets = InMemoryBudgetCounters()
        self.deployment_tool_policies: list[Any] = []
        self.traces: RunTraces = NO_TRACES
        """Where runs' spans go (a test of traces swaps in the OpenTelemetry adapter)."""
        if seed_builtins:
            from langorch.app.definitions import seed_builtins as seed

            seed(self.definitions)

    def another_process(self) -> Fakes:
        """The same stores seen by another process (a new Lambda sandbox): no warm caches."""
        other = copy.copy(self)
        other.secrets = self.secrets.another_process()
        for cached in ("compiler", "memory"):
            other.__dict__.pop(cached, None)
        return other

    def with_script(self, script: dict[str, Any] | str | None) -> Fakes:
        """Another process whose offline LLM answers from ``script``."""
        from langorch.llm import LLMRegistry

        other = self.another_process()
        other.llm = LLMRegistry(default_provider="offline", offline_script=script)
        return other

    def redeployed(self, **settings: Any) -> Fakes:
        """The same stores seen by a process of a deployment with other settings."""
        other = self.another_process()
        other.settings = self.settings.model_copy(update=settings)
        other.schedules = self.schedules.configured_as(
            role_arn=other.settings.scheduler_role_arn,
            target_arn=other.settings.trigger_function_arn,
            dead_letter_arn=other.settings.schedule_dlq_arn,
        )
        return other

    @property
    def stepfunctions(self) -> InMemoryExecutions:
        """The container's older name for :attr:`executions`."""
        return self.executions

    @cached_property
    def compiler(self) -> GraphCompiler:
        """Graphs compiled from the fake definitions, checkpointed in memory."""
        from langorch.engine.compiler import GraphCompiler

        return GraphCompiler(self.definitions, self.checkpointer)

    @cached_property
    def memory(self) -> MemoryManager:
        """Long-term memory on LangGraph's ``InMemoryStore`` (shared by every process)."""
        from langorch.app.memory import MemoryManager

        return MemoryManager(self.memory_store)
