"""The settings models of the built-in kinds: part of the stored format (``PlanStep.http``,
``PlanStep.approval``, …), so they sit below :mod:`langorch.domain.definitions` and import
nothing of it. Each kind's module (``domain/kinds/<kind>.py``) says what its settings mean; a
kind registered later keeps its model in its own module (``StepKind.settings_model``).
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from langorch.domain.approvals.edits import EditableType
from langorch.domain.approvals.policy import (
    ApprovalPolicy,
    BusinessHours,
    Duration,
    EscalationLevel,
    QuorumSpec,
    RejectionRule,
    Reminders,
    policy_of,
)

IDENTIFIER = r"^[A-Za-z][A-Za-z0-9_\-]{0,127}$"
"""Block, workflow and step ids: a letter, then letters, digits, ``_`` or ``-``."""


class Settings(BaseModel):
    """Base of a kind's settings model: unknown fields are errors, not silently ignored."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)


class HttpSpec(Settings):
    """An outbound HTTP call. Strings are templates over the step's inputs."""

    method: Literal["GET", "POST", "PUT", "PATCH", "DELETE"] = "POST"
    url: str
    headers: dict[str, str] = Field(default_factory=dict)
    body: Any = None
    """JSON body; strings inside are rendered as templates."""
    response_key: str | None = None
    """``shared_context`` key that receives ``{"status": …, "body": …}``; default: the first
    output key of the block, else ``<step_id>_response``."""


READ_FILE_DEFAULT_BYTES = 262_144
"""``read_file``'s default bound: 256 KiB."""


READ_FILE_MAX_BYTES = 1_048_576
"""``read_file``'s hard bound, 1 MiB: the parsed content lands in the run's checkpointed state."""


ReadFileFormat = Literal["auto", "text", "json", "yaml", "csv", "lines"]


class ReadFileSpec(Settings):
    """Read one object of the files bucket into ``shared_context``.

    The defaults read the file that started the run: an ``s3`` trigger's run input carries
    ``bucket`` and ``key``. Only the deployment's files bucket can be read, never under its
    checkpoint prefix (other runs' state), and never more than ``max_bytes``.

    Formats: ``text`` (a UTF-8 string), ``lines`` (a list of strings), ``json`` / ``yaml`` (the
    parsed document), ``csv`` (a list of dicts keyed by the header row; short rows are padded
    with ``""``, a row longer than the header is an error). ``auto`` picks by the key's suffix:
    ``.json`` json, ``.yaml`` / ``.yml`` yaml, ``.csv`` csv, anything else text.
    """

    bucket: str = "{{ bucket }}"
    """The bucket (a template); it must be the deployment's files bucket."""
    key: str = "{{ key }}"
    """The object key (a template)."""
    format: ReadFileFormat = "auto"
    max_bytes: int = Field(default=READ_FILE_DEFAULT_BYTES, ge=1, le=READ_FILE_MAX_BYTES)
    """A larger object fails the step (it is never read past this bound)."""
    output_key: str | None = None
    """``shared_context`` key that receives the parsed content; default: the first output key
    of the block, else ``<step_id>_content``. The metadata always goes to ``<step_id>_file``."""


class MemorySpec(Settings):
    """How a ``query_memory`` / ``save_memory`` step addresses the long-term store."""

    scope: Literal["preferences", "history"] = "preferences"
    keys: list[str] = Field(default_factory=list)
    """``save_memory``: the ``shared_context`` keys to store (default: the block's input keys).
    ``query_memory``: the keys to read (default: everything in the scope)."""
    query: str | None = Field(default=None, exclude_if=lambda value: value is None)
    """``query_memory``: what to search the scope for, a template over the step's inputs
    (default: the block's first input key, seed 000's ``memory_query``). Only the matching
    items are returned; an empty query reads the whole scope. Left out of dumps while unset,
    so stored definitions keep their version."""


class WaitSpec(Settings):
    """Sleep without a running Lambda: exactly one of ``seconds`` or ``until``."""

    seconds: int | str | None = None
    """Seconds, or a template that renders to a number."""
    until: str | None = None
    """An ISO-8601 time, or a template that renders to one."""


class LoopSpec(Settings):
    """For-each over a list: the ``body`` steps run once per item, in order.

    Each iteration sees ``item_key`` and ``index_key`` in ``shared_context``. When the body's
    last step finishes, the ``collect`` keys of that iteration are appended to ``collect_key``.
    """

    over: str
    """A ``shared_context`` key or a template expression that yields the list."""
    body: list[str] = Field(min_length=1)
    """Step ids that form the loop body (they must depend only on the loop or on each other)."""
    item_key: str = "item"
    index_key: str = "index"
    collect: list[str] = Field(default_factory=list)
    """Keys to collect from each iteration (default: the body steps' output keys)."""
    collect_key: str | None = None
    """Where the list of collected results goes (default: ``<step_id>_results``)."""
    max_iterations: int = Field(default=100, ge=1, le=10_000)


class SubflowSpec(Settings):
    """Run another workflow, pinned to a version, as part of this run."""

    workflow_id: str = Field(pattern=IDENTIFIER)
    version: int | None = Field(default=None, ge=1)
    """Pinned when the parent is stored: ``None`` means the latest version at that moment."""
    inputs: dict[str, str] = Field(default_factory=dict)
    """Child input key -> parent ``shared_context`` key or template."""
    outputs: list[str] = Field(default_factory=list)
    """Child ``shared_context`` keys copied back (default: all of them)."""


class TerminateSpec(Settings):
    """End the run now."""

    status: Literal["succeeded", "failed"] = "succeeded"
    message: str = ""
    outputs: dict[str, str] = Field(default_factory=dict)
    """Output name -> ``shared_context`` key or template."""


APPROVAL_LABELS = ("approved", "rejected", "timed_out")
"""The outcomes of an approval step."""


class ApprovalSpec(Settings):
    """A human decision. Branch labels: ``approved``, ``rejected``, ``timed_out``."""

    approvers: list[str] = Field(default_factory=list)
    """Email addresses allowed to decide (default: the deployment's default approvers)."""
    timeout_seconds: int = Field(default=86_400, ge=1, le=365 * 86_400)
    on_timeout: Literal["reject", "approve", "fail", "branch"] = "branch"
    """What a timeout means: follow the ``timed_out`` branch (``branch``; falls back to
    ``rejected`` when no such branch exists), decide approve/reject, or fail the run."""
    title: str = ""
    """What is being approved (a template)."""
    message: str = ""
    """Why, for the approver (a template)."""
    show_keys: list[str] = Field(default_factory=list)
    """``shared_context`` keys shown to the approver."""
    editable_keys: list[str] = Field(default_factory=list)
    """Keys the approver may change; their edits are merged into ``shared_context``. Each is
    provided by an input or an earlier step, or declared in ``editable_types``."""
    editable_types: dict[str, EditableType] = Field(default_factory=dict)
    """Editable keys the approver fills in (nothing provides them before), by type: ``text``,
    ``number``, ``yes_no``, ``list`` (one item per line) or ``json``."""
    require_code: bool = False
    """Ask for the one-time code from the email on the page (stops link-clicking scanners)."""
    max_iterations: int | None = Field(default=None, ge=1, le=100)
    """Review-loop bound: at most this many rounds through this approval. When a rejection
    would start one more round, the run follows ``on_max_iterations`` instead."""
    on_max_iterations: str | None = None
    """Step to go to when the last round is rejected (e.g. a ``terminate`` with status
    ``failed``). Without it the run fails with ``ReviewLoopExhaustedError``."""
    feedback_key: str = "feedback"
    """``shared_context`` key that receives the approver's comment (for regeneration)."""
    # The policy (domain/approvals/policy.py): how many must approve, when to remind and
    # escalate, who may hand over their vote, and whether the run's starter may approve.
    quorum: QuorumSpec = "any"
    rejection: RejectionRule = "any_reject"
    reminders: Reminders | list[Duration] | None = None
    escalation: list[EscalationLevel] = Field(default_factory=list)
    business_hours: BusinessHours | None = None
    delegation: bool = False
    separation_of_duties: bool = False
    subaddressing: bool = True

    def policy(self) -> ApprovalPolicy:
        """The step's approval policy."""
        return policy_of(
            quorum=self.quorum,
            rejection=self.rejection,
            reminders=self.reminders,
            escalation=self.escalation,
            business_hours=self.business_hours,
            delegation=self.delegation,
            separation_of_duties=self.separation_of_duties,
            subaddressing=self.subaddressing,
        )


class DecisionCase(Settings):
    """One rule of a condition decision: the first case whose ``when`` is true wins."""

    when: str
    branch: str
