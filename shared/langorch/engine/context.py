"""What a compiled graph's nodes need at run time, passed as LangGraph's runtime context.

Nothing here is checkpointed: it is rebuilt by every segment from the run record and the
container, so a resumed run in a fresh process gets fresh clients.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from langorch.domain.agents import AgentRegistration
    from langorch.domain.artifacts import Artifact
    from langorch.domain.budgets import BudgetSpec
    from langorch.domain.ckp.binding import Catalog
    from langorch.domain.definitions import TaskPlan
    from langorch.domain.model_limits import ModelLimits
    from langorch.domain.prices import PriceTable
    from langorch.domain.resources import Grant
    from langorch.domain.tool_policies import ToolPolicy
    from langorch.llm import LLMRequest, LLMResult


class LLMInvoker(Protocol):
    """The part of the LLM registry the executors use."""

    def invoke(self, request: LLMRequest) -> LLMResult: ...


class Memory(Protocol):
    """Long-term memory (seed 000 §8), namespaced by user and workflow."""

    def get_preferences(self, user_id: str) -> dict[str, Any]: ...

    def update_preferences(self, user_id: str, values: dict[str, Any]) -> None: ...

    def get_history(
        self, user_id: str, workflow_id: str, limit: int = 10
    ) -> list[dict[str, Any]]: ...

    def save_history(
        self, user_id: str, workflow_id: str, run_id: str, summary: dict[str, Any]
    ) -> None: ...

    def search_preferences(
        self, user_id: str, query: str, keys: Sequence[str] = ()
    ) -> dict[str, Any]: ...

    def search_history(
        self, user_id: str, workflow_id: str, query: str, limit: int = 10
    ) -> list[dict[str, Any]]: ...


class HttpCaller(Protocol):
    """Outbound HTTP for ``http`` steps."""

    def __call__(
        self,
        method: str,
        url: str,
        *,
        headers: dict[str, str],
        body: Any,
        timeout: float,
    ) -> tuple[int, Any]: ...


class FileReader(Protocol):
    """Reads objects of the files bucket for ``read_file`` steps."""

    @property
    def bucket(self) -> str:
        """The only bucket steps may read (``Settings.bucket``)."""
        ...

    @property
    def checkpoint_prefix(self) -> str:
        """Where checkpoints are offloaded in that bucket: never readable by steps."""
        ...

    def read(self, bucket: str, key: str, *, max_bytes: int) -> tuple[bytes, dict[str, Any]]:
        """The object's bytes and ``{"bucket", "key", "size", "etag"}``.

        Raises:
            FileReadError: missing, larger than ``max_bytes``, or S3 failed.
        """
        ...


class StepEffects(Protocol):
    """One attempt of one step's external calls, recorded so a replay does not repeat them."""

    @property
    def toolbox(self) -> Any:
        """The step's bound tools (a :class:`langorch.llm.toolbox.Toolbox`), or ``None``."""
        ...

    @property
    def tool_cost_usd(self) -> float:
        """What the tool calls made so far declare they cost (US dollars)."""
        ...

    async def once(
        self, kind: str, digest: str, call: Callable[[], Awaitable[dict[str, Any]]]
    ) -> tuple[dict[str, Any], bool]:
        """Make ``call`` unless recorded; returns ``(result, replayed)``."""
        ...

    async def aclose(self) -> None:
        """Close what the attempt opened (MCP sessions)."""
        ...


ToolGate = Callable[
    [str, dict[str, Any], str | None, Sequence["ToolPolicy"]], Awaitable[str | None]
]
"""Asked before each tool call ``(tool, args, server, server's rules)`` (``server``: the
registered tool server the call goes to, ``None`` for a built-in tool): ``None`` lets it run, a
text refuses it (what the model is told). It may park the run on an approval (``interrupt``)."""


class SideEffects(Protocol):
    """Opens the recorded calls (and tools) of one attempt of one step."""

    def begin(
        self,
        *,
        step_id: str,
        visit: int,
        attempt: int,
        tools: list[str],
        emit: Callable[[Any], None],
        gate: ToolGate | None = None,
    ) -> StepEffects:
        """The effects of this attempt; ``emit`` takes timeline events (tool calls); ``gate``
        is asked before each tool call (the workflow's tool policies)."""
        ...


class ArtifactWriter(Protocol):
    """Where ``attach`` steps keep files (the writing half of
    ``langorch.app.artifacts.ArtifactStore``)."""

    def put(self, run_id: str, step_id: str, name: str, data: bytes, content_type: str) -> Artifact:
        """Keep ``data`` as the step's artifact ``name`` (the same name again replaces it).

        Raises:
            ArtifactError: the name cannot name a file.
            StorageError: the store refused.
        """
        ...


class Downloader(Protocol):
    """Fetches what ``attach`` steps' ``url`` sources name."""

    def __call__(self, url: str, *, max_bytes: int, timeout: float) -> tuple[bytes, str | None]:
        """The file's bytes and its ``Content-Type`` (``None``: none given).

        Raises:
            ArtifactError: an error status or no answer (``retryable`` when worth another try).
            ArtifactTooLargeError: the file is over ``max_bytes``.
        """
        ...


class ResourceGate(Protocol):
    """The part of the resource locks (``app.ports.ResourceLocks``) a step's gate uses."""

    def acquire(
        self, name: str, holder: str, *, now: float, lease_seconds: float, wait_seconds: float
    ) -> Grant: ...

    def release(self, name: str, holder: str) -> bool: ...

    def reserve(self, name: str, holder: str, *, now: float, limit: int, period: float) -> float:
        """Reserve ``holder``'s start under ``limit`` starts per ``period``: when it may start."""
        ...

    def ensure_limit(self, name: str, limit: int) -> None:
        """Make ``limit`` the resource's ``concurrency_limit`` (a model's, from the settings)."""
        ...


class BudgetCounter(Protocol):
    """The workflow's stored spend per day and month (``app.ports.BudgetCounters``)."""

    def reserve(self, key: str, amount: int, limit: int) -> bool: ...

    def settle(self, key: str, amount: int) -> None: ...

    def spent(self, key: str) -> int: ...


class ActionDispatch(Protocol):
    """Performs a CKP step's action on a registered agent or MCP tool (``app.agent_calls``)."""

    def catalog(self, agent: str | None = None, servers: frozenset[str] = ...) -> Catalog:
        """What the binding rules need for one node: its agent's registration (when registered)
        and which of the tool servers its ``server.tool`` actions name are registered."""
        ...

    async def call_agent(
        self,
        agent: AgentRegistration,
        request: dict[str, Any],
        *,
        idempotency_key: str,
        timeout: float,
    ) -> list[dict[str, Any]]:
        """One call to an agent: ``request["steps"]`` in, one result per step out
        (``{"status": "ok", "output": …}`` or ``{"status": "error", "error": …}``).

        Raises:
            AgentCallError: the agent did not answer, or answered with an error status.
        """
        ...

    async def call_tool(
        self, server: str, tool: str, args: dict[str, Any], *, timeout: float
    ) -> tuple[Any, bool]:
        """Call a registered MCP server's tool: ``(output, failed)``."""
        ...


class SecretReader(Protocol):
    """Reads the secrets ``{{ secrets.NAME }}`` names (the deployment's secrets store)."""

    def get_json(self, name: str, *, fresh: bool = False) -> dict[str, Any]: ...


@dataclass
class EngineContext:
    """Per-segment runtime context of a run's graph."""

    run_id: str
    workflow_id: str
    workflow_version: int
    user_id: str
    llm: LLMInvoker
    memory: Memory | None = None
    http: HttpCaller | None = None
    http_allowed_domains: tuple[str, ...] | None = None
    """The hosts ``http`` steps may call (:mod:`langorch.domain.egress`); ``None``: any."""
    files: FileReader | None = None
    """``read_file`` steps' reader (the files bucket); such a step fails without one."""
    artifacts: ArtifactWriter | None = None
    """Where ``attach`` steps keep files; such a step fails without one."""
    download: Downloader | None = None
    """What ``attach`` steps download ``url`` sources with; such a file fails without one."""
    subflows: Callable[[str, int | None], tuple[TaskPlan, Any]] | None = None
    """Resolves a pinned child workflow to (plan, compiled graph without checkpointer)."""
    side_effects: SideEffects | None = None
    """Recorded LLM and tool calls (seed 001 §5); ``None``: calls are made, not recorded, and
    only the built-in tools bind."""
    default_provider: str | None = None
    default_model: str | None = None
    default_approvers: list[str] = field(default_factory=list)
    segment: int = 1
    resources: ResourceGate | None = None
    """Leases for steps that name a ``resource``; such a step fails without it."""
    resource_lease_seconds: float = 1020.0
    """How long a step's lease lasts: longer than the segment that took it can run, so only a
    dead holder's lease expires."""
    model_limits: ModelLimits | None = None
    """The deployment's per-model concurrency and rate (``model_limits``); ``None``: none."""
    actions: ActionDispatch | None = None
    """Agents and MCP tools for CKP steps; without it only built-in actions bind."""
    secrets: SecretReader | None = None
    """Where ``{{ secrets.NAME }}`` is read when a step runs; without it such a step fails."""
    prices: PriceTable | None = None
    """What the run's LLM calls cost (the shipped table, the price file, the workflow's
    ``prices:``); ``None``: calls are not priced."""
    spent_usd: float = 0.0
    """What the run has spent so far: the run record's cost when the segment started, plus
    every priced attempt of this segment (failed ones too), added as they end."""
    budget: BudgetSpec | None = None
    """The workflow's budget, its approvers resolved (``None``: no budget)."""
    budget_counters: BudgetCounter | None = None
    """The workflows' stored day and month spend (``None``: period budgets are not kept)."""
    budget_periods: list[tuple[str, int]] = field(default_factory=list)
    """This segment's period counters: ``(key, limit in micro-dollars)`` (the day and month
    of the segment's start)."""
    tool_policies: list[ToolPolicy] = field(default_factory=list)
    """The workflow's tool-call rules, their approvers resolved (empty: every call allowed)."""
    deployment_tool_policies: list[ToolPolicy] = field(default_factory=list)
    """The deployment's tool-call rules (``LANGORCH_TOOL_POLICIES_FILE``), their approvers
    resolved; they and a tool server's rules weigh with the workflow's, the strictest winning."""
    default_max_tokens: int | None = None
    """The deployment's output limit for LLM steps that set none (for estimates)."""
    redacted: frozenset[str] = frozenset()
    """Variables never shown: the timeline and the logs print ``[redacted]`` for them (a CKP
    procedure's sensitive variables)."""
