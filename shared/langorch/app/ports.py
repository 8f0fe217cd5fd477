"""Ports: what the use-cases need from the outside world, as ``typing.Protocol``s.

Each Protocol holds only the methods the use-cases call, and three kinds of implementation
satisfy them structurally: the AWS adapters (``adapters/dynamodb`` for the tables; Step
Functions, Secrets Manager, Scheduler, SES), wired by the cloud's composition root
(:mod:`langorch.composition.container`); the SQLite stores of the embedded default
(``adapters/sqlite``: runs, approvals, definitions, secrets, schedules, tool servers, resource
locks, tasks, logs, in one WAL file), wired by :mod:`langorch.composition.embedded` for
``langorch dev``; and the in-memory fakes of ``tests/fakes``, wired by the tests. One contract
suite per port (``tests/contracts``) runs against the fake, the SQLite store and the AWS adapter
alike, so none can drift from the others.

Two ports live beside their only users: :class:`langorch.app.definitions.DefinitionsStore`
(registration) and :class:`langorch.engine.context.FileReader` (``read_file`` steps). This
module imports nothing heavy at run time, so the trigger function's cold start stays light.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

if TYPE_CHECKING:
    from langorch.domain.agents import AgentRegistration
    from langorch.domain.approvals.channels import PostedMessage
    from langorch.domain.approvals.record import Approval
    from langorch.domain.definitions import TaskPlan
    from langorch.domain.resources import Grant, ResourceState
    from langorch.domain.runs import ForkLink, PauseRequest, RunRecord, RunStatus, TimelineEvent
    from langorch.domain.stored import StoredDefinition
    from langorch.domain.tool_servers import ToolServer
    from langorch.domain.triggers import PutEvent
    from langorch.llm.toolbox import ToolSpec
    from langorch.web.emails import OutgoingEmail

__all__ = [
    "AgentStore",
    "ApprovalNotifier",
    "ChatNotifier",
    "Clock",
    "EmailSender",
    "EventBus",
    "Executions",
    "Ids",
    "ResourceLocks",
    "RunsStore",
    "ScheduleStore",
    "SecretsStore",
    "StoredSchedule",
    "ToolConnection",
    "ToolConnector",
    "ToolServerStore",
    "WorkflowSource",
]


class Clock(Protocol):
    """The current time, timezone-aware UTC (a settable clock in tests)."""

    def __call__(self) -> datetime: ...


class Ids(Protocol):
    """New unique ids (run ids, lease owners); deterministic in tests."""

    def __call__(self) -> str: ...


class WorkflowSource(Protocol):
    """Where the use-cases that start runs read workflows (the definitions table: DynamoDB,
    or SQLite in the embedded default)."""

    def get_workflow(self, workflow_id: str, version: int | None = None) -> TaskPlan | None:
        """The workflow at ``version`` (``None``: latest), or ``None``."""
        ...

    def list_workflows(self) -> list[TaskPlan]:
        """The active version of every workflow that has one, by id (what runs start on)."""
        ...

    def stored_workflows(self) -> list[StoredDefinition[TaskPlan]]:
        """Every stored workflow, by id: its latest version (active or a draft) with its
        ``active_version`` (``None`` for a workflow stored only as drafts) — what the CLI and
        the console list."""
        ...


class RunsStore(Protocol):
    """Run records, their leases, dedupe markers and timelines (the runs table: DynamoDB's
    ``adapters.dynamodb.runs``, SQLite's ``adapters.sqlite.runs``, the fake's
    ``tests/fakes``).

    Conditional semantics every implementation keeps (``tests/contracts/test_runs_store.py``):

    * ``create_run`` stores a run once per dedupe key and once per run id; a repeat returns the
      existing run and ``False``.
    * ``acquire_lease`` succeeds only when no unexpired lease is held, and returns a fence one
      higher than the last; writes carrying an older fence raise ``LeaseHeldError``.
    * ``save_run`` raises ``NotFoundError`` for an unknown run and ``ConflictError`` when the run
      already ended with another status (re-saving the same ending is allowed). With
      ``in_execution`` it writes only while the stored run is still in that execution
      (``current_execution``), else ``ConflictError``: a cancel read before a hand-over to the
      next execution never writes back the execution it read.
    * ``reopen_run`` writes only while the stored run's ``attempt`` is the expected one: of two
      concurrent redrives of one run, exactly one reopens it.
    * A pause request is kept beside the record (``request_pause``, ``lift_pause``,
      ``park_paused``): ``save_run`` never changes it, ``get_run`` and ``list_runs`` read it
      into ``RunRecord.pause``. ``park_paused`` and ``lift_pause`` are ordered by the store, so
      of the two exactly one wakes an execution parked on a pause.
    """

    def create_run(self, run: RunRecord) -> tuple[RunRecord, bool]:
        """Store a new run, once per dedupe key; returns the stored run and whether it is new."""
        ...

    def get_run(self, run_id: str) -> RunRecord:
        """The run (``NotFoundError`` when unknown)."""
        ...

    def save_run(
        self,
        run: RunRecord,
        *,
        fence: int | None = None,
        release: bool = False,
        events: Sequence[TimelineEvent] = (),
        in_execution: str | None = None,
    ) -> None:
        """Store the run's new state, under the lease ``fence`` when given; with ``release``,
        the same write gives that lease back; with ``events``, the same write adds (or
        replaces, by ``seq``) those timeline events: both land or neither. With
        ``in_execution``, only while the stored run is in that execution (else
        ``ConflictError``)."""
        ...

    def reopen_run(self, run: RunRecord, *, expected_attempt: int) -> bool:
        """Store ``run`` (reopened by a redrive) only if the stored run is still on
        ``expected_attempt``; returns whether it did (``False``: another redrive won)."""
        ...

    def add_fork(self, run_id: str, link: ForkLink) -> None:
        """Note a run forked from ``run_id`` on its record (``forks``), without rewriting it."""
        ...

    def request_pause(self, run_id: str, pause: PauseRequest) -> tuple[RunRecord, bool]:
        """Ask the run to pause; returns the run with the request that stands and whether this
        call made it (a request already standing is kept). ``NotFoundError`` for an unknown run,
        ``ConflictError`` for one that has ended (its ending stands)."""
        ...

    def lift_pause(self, run_id: str) -> tuple[PauseRequest | None, str | None]:
        """Lift the standing request; returns it (``None``: none stood) and the task token of
        the execution parked on the pause, if one parked (``NotFoundError`` for an unknown
        run)."""
        ...

    def park_paused(self, run_id: str, task_token: str) -> bool:
        """Keep the task token of the execution parked on the pause, only while a request
        stands; whether it was kept (``False``: lifted meanwhile, so nobody will wake it)."""
        ...

    def pause_of(self, run_id: str) -> PauseRequest | None:
        """The standing request, in one small read (a segment asks at every step boundary;
        ``NotFoundError`` for an unknown run)."""
        ...

    def acquire_lease(
        self,
        run_id: str,
        owner: str,
        *,
        now: float,
        ttl_seconds: float,
        saving: RunRecord | None = None,
    ) -> int:
        """Take the run's lease; returns the new fence (``LeaseHeldError`` when another owner
        holds it; ``owner`` itself takes it again: a retry of its segment whose attempt died
        holding it). With ``saving``, the same write stores that run as :meth:`save_run` would
        (``ConflictError`` when it would change an ending)."""
        ...

    def release_lease(self, run_id: str, fence: int) -> bool:
        """Give the lease back if ``fence`` still holds it; returns whether it did."""
        ...

    def append_events(
        self, run_id: str, events: Sequence[TimelineEvent], *, fence: int | None = None
    ) -> None:
        """Add (or replace, by ``seq``) timeline events."""
        ...

    def get_timeline(self, run_id: str) -> list[TimelineEvent]:
        """The run's timeline in ``seq`` order (empty for an unknown run)."""
        ...

    def next_event_seq(self, run_id: str) -> int:
        """The ``seq`` after the run's last timeline event (1 for none)."""
        ...

    def list_runs(
        self,
        workflow_id: str | None = None,
        status: RunStatus | None = None,
        limit: int = 50,
        before: tuple[datetime, str] | None = None,
    ) -> list[RunRecord]:
        """Runs, newest first, optionally of one workflow and/or in one status (1-1000).

        ``before`` is a page cursor: only runs older than this ``(created_at, run_id)``."""
        ...


class Executions(Protocol):
    """The run state machine's executions (Step Functions), one per run, named by its id."""

    def start(self, run_id: str, payload: dict[str, Any]) -> tuple[str, bool]:
        """Start the execution named ``run_id``; returns its ARN and whether this call started
        it (a second start of the same name starts nothing)."""
        ...

    def stop(self, run_id: str, cause: str) -> None:
        """Stop the run's execution (a missing or ended one is fine)."""
        ...

    def send_success(self, task_token: str, output: dict[str, Any]) -> None:
        """Resume the task waiting on ``task_token`` (``TaskClosedError`` when closed)."""
        ...

    def describe(self, run_id: str) -> dict[str, Any]:
        """``DescribeExecution`` of the run's execution: ``status`` (``RUNNING``, ``SUCCEEDED``,
        ``FAILED``, ``TIMED_OUT``, ``ABORTED``), ``error``/``cause`` when it failed
        (``NotFoundError`` when there is none)."""
        ...


class SecretsStore(Protocol):
    """JSON secrets: webhook secrets, link-signing keys (Secrets Manager in the cloud,
    ``adapters.sqlite.secrets`` in the embedded default).

    Reads are cached per process; ``fresh=True`` reads the newest value.
    """

    def get_json(self, name: str, *, fresh: bool = False) -> dict[str, Any]:
        """The secret's JSON object (``SecretNotFoundError`` when missing)."""
        ...

    def put_json(self, name: str, value: dict[str, Any], *, description: str = "") -> bool:
        """Create or update the secret; returns whether it was created."""
        ...

    def replace_json(self, name: str, value: dict[str, Any]) -> None:
        """Store a new value of an existing secret (``SecretNotFoundError`` when missing)."""
        ...

    def exists(self, name: str) -> bool:
        """Whether the secret exists (no value is read)."""
        ...


class EmailSender(Protocol):
    """Where approval emails go: SES in the cloud, the outbox folder locally."""

    def send(self, email: OutgoingEmail) -> str:
        """Send one email; returns a message id."""
        ...


class ApprovalNotifier(Protocol):
    """One channel approval requests reach people through, besides email (Slack; Teams next).

    An adapter renders the request its own way (Slack: Block Kit), never with a signed link or a
    task token in it: the message's buttons only name the approval and the decision, and the
    person who presses one is identified by the channel, not by what the message carries.
    """

    @property
    def channel(self) -> str:
        """The channel's name in ``channels:`` (``slack``)."""
        ...

    def post_request(
        self, approval: Approval, details_url: str | None, *, skip: Sequence[str | None] = ()
    ) -> list[PostedMessage]:
        """Post the request (one shared channel, or one DM per approver not in ``skip``).

        Returns:
            The messages posted, each to be remembered for :meth:`show_decided`.
        """
        ...

    def show_decided(
        self, approval: Approval, posted: PostedMessage, details_url: str | None
    ) -> None:
        """Edit a posted message to show the outcome: who decided, when (buttons removed)."""
        ...


@runtime_checkable
class ChatNotifier(ApprovalNotifier, Protocol):
    """A notifier whose messages people answer in the chat: it names them and tells them."""

    def address_of(self, user_id: str) -> str | None:
        """The address the chat's user goes by (an explicit mapping wins; then their
        profile's email, cached); ``None`` when the chat shows none."""
        ...

    def tell(self, posted: PostedMessage, user_id: str, text: str) -> None:
        """Answer one person beside the message, visible to them alone (Slack: ephemeral)."""
        ...


@runtime_checkable
class ChatThreads(Protocol):
    """A chat whose request messages carry a thread (Slack): what happens to a request after
    it was posted (votes, reminders, escalations, delegations) is told there, and the
    message itself shows the quorum's progress."""

    def reply(self, posted: PostedMessage, text: str) -> None:
        """Post ``text`` in ``posted``'s thread."""
        ...

    def show_progress(
        self, approval: Approval, posted: PostedMessage, details_url: str | None, progress: str
    ) -> None:
        """Edit the (still pending) message to show ``progress`` (``1 of 2 approvals``)."""
        ...


@runtime_checkable
class ChatForms(Protocol):
    """A chat whose people can open a form beside a request (Slack: a modal) for a comment
    and typed edits."""

    def open_form(self, trigger: str, where: Mapping[str, str]) -> str:
        """Open the form at once (Slack's trigger id lasts three seconds), showing that the
        approval is being read; returns the form's id for :meth:`fill_form`."""
        ...

    def fill_form(self, form_id: str, approval: Approval, where: Mapping[str, str]) -> None:
        """Show the approval's decision, comment and editable values in the open form."""
        ...

    def close_form(self, form_id: str, text: str) -> None:
        """Show ``text`` in the open form instead, with nothing to submit."""
        ...


Job = Mapping[str, Any]
"""Work handed on: JSON-shaped (an asynchronous invocation's payload)."""


class Handoff(Protocol):
    """Work acknowledged now and done a moment later, out of the request (a chat's button
    press: Slack wants its answer within three seconds, whatever the stores are doing).

    Handed on durably: once :meth:`hand_off` returns, the job runs even if this process ends,
    and a job whose run raises is run again (the job must be idempotent). In the cloud the
    function invokes itself asynchronously (Lambda queues the event and retries it); locally
    it runs in this process, on a worker thread.
    """

    def hand_off(self, job: Job, *, function_arn: str, run: Callable[[Job], None]) -> None:
        """Queue ``job`` for ``function_arn`` (the cloud), or for ``run`` here (locally).

        Raises:
            StorageError: it could not be handed on (nothing was queued; the caller answers
                with an error, and the person presses again).
        """
        ...


class StoredSchedule(Protocol):
    """A schedule as read back (``langorch.adapters.scheduler.ScheduleInfo`` is one)."""

    @property
    def name(self) -> str: ...
    @property
    def expression(self) -> str: ...
    @property
    def timezone(self) -> str: ...
    @property
    def input(self) -> dict[str, Any]: ...
    @property
    def state(self) -> str: ...
    @property
    def target_arn(self) -> str | None: ...
    @property
    def role_arn(self) -> str | None: ...
    @property
    def dead_letter_arn(self) -> str | None: ...


class EventBus(Protocol):
    """Where ``langorch events send`` puts an event (EventBridge; the local bus in the embedded
    default, which delivers it to the matching event triggers at once)."""

    def put(self, bus: str, source: str, detail_type: str, detail: dict[str, Any]) -> PutEvent:
        """Put one event; its id (and, locally, the workflows it reached)."""
        ...


class ScheduleStore(Protocol):
    """The schedules that fire workflows' schedule triggers (EventBridge Scheduler in the cloud;
    ``adapters.sqlite.schedules``, fired by the local stack's tick, in the embedded default)."""

    @property
    def configured(self) -> bool:
        """Whether schedules can be written (a target and a role are configured)."""
        ...

    def ensure_group(self) -> None:
        """Create the schedule group when missing."""
        ...

    def put(
        self,
        name: str,
        cron: str,
        timezone: str,
        input: dict[str, Any],
        *,
        description: str = "",
        state: str = "ENABLED",
    ) -> bool:
        """Create or update a schedule (``state``: ``ENABLED`` or ``DISABLED``); returns
        whether it was created."""
        ...

    def set_state(self, name: str, state: str) -> bool:
        """Pause (``DISABLED``) or resume (``ENABLED``) a schedule; returns whether it exists."""
        ...

    def delete(self, name: str) -> bool:
        """Delete a schedule; returns whether one was deleted."""
        ...

    def list(self, prefix: str | None = None) -> Sequence[StoredSchedule]:
        """Every schedule whose name starts with ``prefix``, by name."""
        ...


class ToolServerStore(Protocol):
    """Registered tools: MCP servers per deployment (the definitions table in DynamoDB, or
    ``adapters.sqlite.tool_servers``).

    Contract (``tests/contracts/test_tool_server_store.py``): ``put`` replaces a registration
    of the same name and says whether it was new; ``delete`` says whether there was one.
    """

    def put(self, server: ToolServer) -> bool:
        """Store or replace a registration; returns whether it is new."""
        ...

    def get(self, name: str) -> ToolServer | None:
        """The registration named ``name``, or ``None``."""
        ...

    def list(self) -> list[ToolServer]:
        """Every registration, by name."""
        ...

    def delete(self, name: str) -> bool:
        """Remove a registration; returns whether there was one."""
        ...


class AgentStore(Protocol):
    """Registered agents and their capability contracts (seed 001 §7, §8.1): the definitions
    table in DynamoDB, ``adapters.sqlite.agents`` locally.

    Contract (``tests/contracts/test_agent_store.py``): ``put`` replaces a registration of the
    same name and says whether it was new; ``delete`` says whether there was one.
    """

    def put(self, agent: AgentRegistration) -> bool:
        """Store or replace a registration; returns whether it is new."""
        ...

    def get(self, name: str) -> AgentRegistration | None:
        """The registration named ``name``, or ``None``."""
        ...

    def list(self) -> list[AgentRegistration]:
        """Every registration, by name."""
        ...

    def delete(self, name: str) -> bool:
        """Remove a registration; returns whether there was one."""
        ...


class ToolConnection(Protocol):
    """A client session with one registered tool server (MCP over streamable HTTP)."""

    name: str

    async def list_tools(self) -> list[ToolSpec]:
        """The tools the server offers (``ToolServerError`` when it cannot be reached;
        ``ToolServerUnreachableError`` when it could not be connected to or refused the
        credentials)."""
        ...

    async def call(
        self, tool: str, args: dict[str, Any], *, timeout: float, key: str | None = None
    ) -> tuple[str, bool]:
        """Call ``tool``; returns its text output and whether the server marked it an error.

        ``key`` is the call's idempotency key, the same on every retry and replay of the call:
        sent with the request, so a server that remembers it can answer a repeat without
        repeating the effect. A failure of the call (the server's, the transport's,
        ``TimeoutError`` past ``timeout``) is raised as an ``Exception``
        (``ToolServerUnreachableError`` when the call did not reach the server or was refused
        its credentials); a cancellation is only ever the caller's.
        """
        ...

    async def aclose(self) -> None:
        """Close the session (safe to call twice, or never connected)."""
        ...


class ToolConnector(Protocol):
    """Opens a :class:`ToolConnection` to a registered server (``adapters.mcp.McpConnection``).

    ``call_timeout`` is how long the connection's calls may take: its HTTP reads wait that
    long (connecting and listing have their own, shorter bound).
    """

    def __call__(
        self, name: str, url: str, headers: dict[str, str], *, call_timeout: float = ...
    ) -> ToolConnection: ...


class BudgetCounters(Protocol):
    """What each workflow spent per period (``domain.budgets``), in micro-dollars.

    Contract (``tests/contracts/test_budget_counters.py``): a reservation is one conditional
    write, so of concurrent reservations against one key no set of granted ones passes the
    limit; a settle adds unconditionally (negative: gives back).
    """

    def reserve(self, key: str, amount: int, limit: int) -> bool:
        """Add ``amount`` to ``key`` if the total stays within ``limit``; whether it did.

        Raises:
            StorageError: the store failed.
        """
        ...

    def settle(self, key: str, amount: int) -> None:
        """Add ``amount`` (may be negative) to ``key``, whatever its total."""
        ...

    def spent(self, key: str) -> int:
        """What ``key`` holds (0 when never written)."""
        ...


class ResourceLocks(Protocol):
    """Resource leases and their FIFO queues (seed 001 §7b), and each resource's limit
    (DynamoDB's ``adapters.dynamodb.resources``, SQLite's ``adapters.sqlite.resources``).

    Conditional semantics every implementation keeps (``tests/contracts/test_resource_locks.py``):

    * ``acquire`` and ``release`` apply :mod:`langorch.domain.resources`' rules to the state
      as stored and write the result only if nobody changed it meanwhile (a conditional write;
      a lost race reads again and retries), so concurrent acquires never grant more than the
      limit and never reorder the queue.
    * Expired leases and waiters are dropped by the next write (reclaimed).
    * An undeclared resource has limit 1.
    """

    def acquire(
        self,
        name: str,
        holder: str,
        *,
        now: float,
        lease_seconds: float,
        wait_seconds: float,
        priority: int = 0,
    ) -> Grant:
        """Take a lease for ``holder``, or queue it (``Grant.position``): behind the waiters
        of its ``priority`` or higher, ahead of the lower ones."""
        ...

    def reserve(self, name: str, holder: str, *, now: float, limit: int, period: float) -> float:
        """Reserve ``holder``'s start under ``limit`` starts per ``period`` seconds; when it
        may start (``now`` or later, after every start reserved before it)."""
        ...

    def release(self, name: str, holder: str) -> bool:
        """Give back ``holder``'s lease and its place in the queue; whether it had either."""
        ...

    def park(self, name: str, holder: str, token: str, *, now: float, wait_seconds: float) -> bool:
        """Keep the task token of ``holder``'s parked run; whether it is already its turn."""
        ...

    def release_run(self, run_id: str) -> list[str]:
        """Release every lease and queue place of a run (it ended); the resources touched."""
        ...

    def set_limit(self, name: str, limit: int) -> None:
        """Declare the resource's ``concurrency_limit`` (leases already held are kept)."""
        ...

    def get(self, name: str) -> ResourceState:
        """The resource as stored (an unknown one: undeclared, limit 1, nothing held)."""
        ...

    def list(self) -> Sequence[ResourceState]:
        """Every resource declared or used, by name."""
        ...
