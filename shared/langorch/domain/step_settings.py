"""The settings models of the built-in kinds: part of the stored format (``PlanStep.http``,
``PlanStep.approval``, …), so they sit below :mod:`langorch.domain.definitions` and import
nothing of it. Each kind's module (``domain/kinds/<kind>.py``) says what its settings mean; a
kind registered later keeps its model in its own module (``StepKind.settings_model``).
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from langorch.domain.approvals.channels import Channel
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


class InputMapping(Settings):
    """An input mapping that says whether it may resolve to nothing (seed 004: optional vs
    required input mappings). The short form ``user_name: request.user.name`` is optional with
    an empty default, as seed 000 reads a missing input."""

    path: str
    """The ``shared_context`` key, or a dotted path into one (``request.user.name``), or a
    step's result (``analyze.output``)."""
    required: bool = False
    """When the path resolves to nothing (or to null), the step fails naming the path."""
    default: Any = ""
    """The value when the path resolves to nothing (not with ``required``)."""


def mapping_source(mapping: str | InputMapping) -> str:
    """The path an input mapping reads, in either form."""
    return mapping if isinstance(mapping, str) else mapping.path


class Hook(Settings):
    """One hook of a step (seed 004's action-node hooks): a transform or a tool call, exactly
    one of them."""

    transform: dict[str, str] | None = None
    """Output key -> expression, as a ``transform`` step (later keys see earlier ones)."""
    tool: str | None = None
    """A tool to call: built-in (``calculator``, ``current_time``, ``http_get``) or registered
    (``langorch tools add``); recorded like an LLM step's tool calls, so a replay never repeats
    it, and on the timeline."""
    args: dict[str, Any] = Field(default_factory=dict)
    """The tool's arguments; strings inside are templates over the step's names."""
    output_key: str | None = None
    """``shared_context`` key that receives the tool's answer (text); default: the tool's name."""

    def written(self) -> list[str]:
        """The keys this hook writes."""
        if self.transform is not None:
            return list(self.transform)
        return [self.output_key or self.tool] if self.tool else []


class StepHooks(Settings):
    """What a step does around its own work: ``pre`` hooks run before it (their outputs are its
    inputs too), ``post`` hooks after it (they see its outputs). Each time the step runs, in
    order, inside the step's attempt and its ``timeout_seconds``; a hook that fails fails the
    attempt like the step's own work."""

    pre: list[Hook] = Field(default_factory=list)
    post: list[Hook] = Field(default_factory=list)


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


DEFAULT_MAX_LOOPS = 3
"""How many times a ``while`` / ``do_while`` loop runs its body at most, unless it says
(seed 004's ``max_loops=3``; seed 003's review loop defaults to 3 rounds too)."""

LoopMode = Literal["for_each", "while", "do_while"]


def _unset(value: Any) -> bool:
    return value is None


class LoopSpec(Settings):
    """Repeat the ``body`` steps: for each item of a list (``over``), or while a condition holds
    (``while``: checked before each round; ``do_while``: after each, so the body runs at least
    once). Exactly one of the three.

    Each round sees ``index_key`` (the round, from 0) in ``shared_context``, a for-each also
    ``item_key``. When the body's last step finishes, the ``collect`` keys of that round are
    appended to ``collect_key``. A for-each runs at most ``max_iterations`` items, a while loop
    at most ``max_loops`` rounds; a bound that cuts the loop short is the outcome
    ``LoopLimitReached``: reported on the timeline and in outputs, routed by the step's
    ``on_max_iterations`` when it declares one, else the run goes on after the loop.
    """

    model_config = ConfigDict(extra="forbid", populate_by_name=True, serialize_by_alias=True)

    over: str | None = Field(default=None, exclude_if=_unset)
    """For-each: a ``shared_context`` key or a template expression that yields the list."""
    while_: str | None = Field(default=None, alias="while", exclude_if=_unset)
    """While: an expression checked before each round; the loop ends when it is false."""
    do_while: str | None = Field(default=None, exclude_if=_unset)
    """Do-while: an expression checked after each round; the loop ends when it is false."""
    body: list[str] = Field(min_length=1)
    """Step ids that form the loop body (they must depend only on the loop or on each other)."""
    item_key: str = "item"
    index_key: str = "index"
    collect: list[str] = Field(default_factory=list)
    """Keys to collect from each iteration (default: the body steps' output keys)."""
    collect_key: str | None = None
    """Where the list of collected results goes (default: ``<step_id>_results``)."""
    max_iterations: int = Field(default=100, ge=1, le=10_000)
    """For-each: the most items it runs (the rest are left out, and reported)."""
    max_loops: int | None = Field(default=None, ge=1, le=10_000, exclude_if=_unset)
    """While / do-while: the most rounds it runs (default :data:`DEFAULT_MAX_LOOPS`)."""

    @property
    def mode(self) -> LoopMode:
        """``for_each``, ``while`` or ``do_while`` (a loop with none is for-each: validation
        reports it)."""
        if self.while_ is not None:
            return "while"
        if self.do_while is not None:
            return "do_while"
        return "for_each"

    @property
    def condition(self) -> str | None:
        """The while / do-while condition (``None`` for a for-each)."""
        return self.while_ if self.while_ is not None else self.do_while

    @property
    def bound(self) -> int:
        """The most rounds: ``max_iterations`` for a for-each, else ``max_loops`` (default 3)."""
        if self.mode == "for_each":
            return self.max_iterations
        return self.max_loops if self.max_loops is not None else DEFAULT_MAX_LOOPS


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


class ApproverSettings(Settings):
    """Who decides, until when, and under which policy: the settings an ``approval`` step and
    an ``ask:`` (a person fixing a failed step) share."""

    approvers: list[str] = Field(default_factory=list)
    """Email addresses allowed to decide (default: the workflow's ``approvers``, else the
    deployment's default approvers)."""
    timeout_seconds: int = Field(default=86_400, ge=1, le=365 * 86_400)
    title: str = ""
    """What is asked (a template)."""
    message: str = ""
    """Why, for the approver (a template)."""
    require_code: bool = False
    """Ask for the one-time code from the email on the page (stops link-clicking scanners)."""
    # The policy (domain/approvals/policy.py): when to remind and escalate, who may hand over
    # their vote, and whether the run's starter may decide.
    reminders: Reminders | list[Duration] | None = None
    escalation: list[EscalationLevel] = Field(default_factory=list)
    business_hours: BusinessHours | None = None
    delegation: bool = False
    separation_of_duties: bool = False
    subaddressing: bool = True

    def policy(self) -> ApprovalPolicy:
        """The policy these settings declare (one decider: the first decision counts)."""
        return policy_of(
            reminders=self.reminders,
            escalation=self.escalation,
            business_hours=self.business_hours,
            delegation=self.delegation,
            separation_of_duties=self.separation_of_duties,
            subaddressing=self.subaddressing,
        )


class ApprovalSpec(ApproverSettings):
    """A human decision. Branch labels: ``approved``, ``rejected``, ``timed_out``."""

    on_timeout: Literal["reject", "approve", "fail", "branch"] = "branch"
    """What a timeout means: follow the ``timed_out`` branch (``branch``; falls back to
    ``rejected`` when no such branch exists), decide approve/reject, or fail the run."""
    show_keys: list[str] = Field(default_factory=list)
    """``shared_context`` keys shown to the approver."""
    editable_keys: list[str] = Field(default_factory=list)
    """Keys the approver may change; their edits are merged into ``shared_context``. Each is
    provided by an input or an earlier step, or declared in ``editable_types``."""
    editable_types: dict[str, EditableType] = Field(default_factory=dict)
    """Editable keys the approver fills in (nothing provides them before), by type: ``text``,
    ``number``, ``yes_no``, ``list`` (one item per line) or ``json``."""
    channels: list[Channel] = Field(default_factory=list)
    """Where the request goes: ``email``, ``slack``, ``teams``, ``console``, several at once
    (empty: the stack's ``approval_channels``). One decision, whichever channel it comes from."""
    max_iterations: int | None = Field(default=None, ge=1, le=100)
    """Review-loop bound: at most this many rounds through this approval. When a rejection
    would start one more round, the run follows ``on_max_iterations`` instead."""
    on_max_iterations: str | None = None
    """Step to go to when the last round is rejected (e.g. a ``terminate`` with status
    ``failed``). Without it the run fails with ``ReviewLoopExhaustedError``."""
    feedback_key: str = "feedback"
    """``shared_context`` key that receives the approver's comment (for regeneration)."""
    # How many must approve, and what a rejection counts for (votes need an approval step:
    # a fix has one decider).
    quorum: QuorumSpec = "any"
    rejection: RejectionRule = "any_reject"

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


ASK = "ask"
"""The value of ``on_error`` (a step) or ``on_failure`` (a workflow) that asks a person to fix a
failed step instead of failing the run (unless the plan has a step named ``ask``: then it is
that step, as before)."""


class AskSpec(ApproverSettings):
    """Who is asked to fix a step that failed after its retries (``on_error: ask``, or the
    workflow's ``on_failure: ask``), on the approval machinery: signed links, the console's
    inbox, email, the policy's reminders and escalation. The person sees the error and the
    step's inputs and may retry with edited inputs, skip the step giving its outputs, or fail
    the run. A timeout fails the run with the step's error."""


class DecisionCase(Settings):
    """One rule of a condition decision: the first case whose ``when`` is true wins."""

    when: str
    branch: str
