"""Blocks and workflows: the definitions users write, store and version.

The names and fields of seed 000 (``BlockDefinition``, ``BlockType``, ``BlockReference``,
``PlanStep``, ``TaskPlan``, ``ScheduleSpec``) are the public vocabulary. They are extended here,
never renamed: a block or plan written as in seed 000 loads and runs unchanged.

A *block* is reusable data describing one unit of work. A *workflow* (``TaskPlan``) wires steps
together; each step either references a block (``block_id``) or declares a control ``kind``
inline (approval, wait, loop, subflow, terminate, transform, http, read_file, decision by
condition).

These models check shapes only. Cross-references (unknown blocks, unreachable steps, cycles,
cron syntax, …) are checked by :mod:`langorch.domain.validation`, which reports every problem at
once with its path.
"""

from __future__ import annotations

import hashlib
import json
from enum import StrEnum
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

IDENTIFIER = r"^[A-Za-z][A-Za-z0-9_\-]{0,127}$"
"""Block, workflow and step ids: a letter, then letters, digits, ``_`` or ``-``."""

MAX_OUTPUT_TOKENS = 200_000
"""Upper bound of ``max_tokens``: above any model's output limit, so only typos are refused."""

RESERVED_STEP_IDS = frozenset(
    {"load_memory", "save_memory", "handle_error", "__start__", "__end__"}
)
"""Node names the compiler adds around the plan's steps."""


class BlockType(StrEnum):
    """What a step does. Seed 000's five kinds plus the control kinds of the orchestrator."""

    action = "action"
    decision = "decision"
    extraction = "extraction"
    query_memory = "query_memory"
    save_memory = "save_memory"
    wait = "wait"
    transform = "transform"
    http = "http"
    approval = "approval"
    loop = "loop"
    subflow = "subflow"
    terminate = "terminate"
    read_file = "read_file"


LLM_KINDS = frozenset({BlockType.action, BlockType.extraction})
"""Kinds whose work is an LLM call with structured output."""


def engine_outputs(step_id: str, kind: BlockType) -> frozenset[str]:
    """``shared_context`` keys the executor itself writes for a step of this kind.

    A decision records its label, an approval its decision (who, what, which round), a memory
    save the keys it stored, a wait how long it slept, a file read the file's metadata
    (``{"bucket", "key", "size", "etag"}``) — so later steps and templates can read them.
    """
    suffix = {
        BlockType.decision: "_branch",
        BlockType.approval: "_decision",
        BlockType.save_memory: "_saved",
        BlockType.wait: "_waited",
        BlockType.read_file: "_file",
    }.get(kind)
    return frozenset({step_id + suffix}) if suffix else frozenset()


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)


# --------------------------------------------------------------------------------------------
# Kind-specific settings
# --------------------------------------------------------------------------------------------


class HttpSpec(_Model):
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


class ReadFileSpec(_Model):
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


class MemorySpec(_Model):
    """How a ``query_memory`` / ``save_memory`` step addresses the long-term store."""

    scope: Literal["preferences", "history"] = "preferences"
    keys: list[str] = Field(default_factory=list)
    """``save_memory``: the ``shared_context`` keys to store (default: the block's input keys).
    ``query_memory``: the keys to read (default: everything in the scope)."""


class WaitSpec(_Model):
    """Sleep without a running Lambda: exactly one of ``seconds`` or ``until``."""

    seconds: int | str | None = None
    """Seconds, or a template that renders to a number."""
    until: str | None = None
    """An ISO-8601 time, or a template that renders to one."""


class LoopSpec(_Model):
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


class SubflowSpec(_Model):
    """Run another workflow, pinned to a version, as part of this run."""

    workflow_id: str = Field(pattern=IDENTIFIER)
    version: int | None = Field(default=None, ge=1)
    """Pinned when the parent is stored: ``None`` means the latest version at that moment."""
    inputs: dict[str, str] = Field(default_factory=dict)
    """Child input key -> parent ``shared_context`` key or template."""
    outputs: list[str] = Field(default_factory=list)
    """Child ``shared_context`` keys copied back (default: all of them)."""


class TerminateSpec(_Model):
    """End the run now."""

    status: Literal["succeeded", "failed"] = "succeeded"
    message: str = ""
    outputs: dict[str, str] = Field(default_factory=dict)
    """Output name -> ``shared_context`` key or template."""


class ApprovalSpec(_Model):
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
    """Keys the approver may change; their edits are merged into ``shared_context``."""
    require_code: bool = False
    """Ask for the one-time code from the email on the page (stops link-clicking scanners)."""
    max_iterations: int | None = Field(default=None, ge=1, le=100)
    """Review-loop bound: at most this many rounds through this approval. When a rejection
    would start one more round, the run follows ``on_max_iterations`` instead."""
    on_max_iterations: str | None = None
    """Step to go to when the bound is reached (default: the ``approved`` branch target)."""
    feedback_key: str = "feedback"
    """``shared_context`` key that receives the approver's comment (for regeneration)."""


class DecisionCase(_Model):
    """One rule of a condition decision: the first case whose ``when`` is true wins."""

    when: str
    branch: str


# --------------------------------------------------------------------------------------------
# Blocks
# --------------------------------------------------------------------------------------------


MAX_PROMPT_CHARS = 4_000_000
"""The most a block may allow with ``max_prompt_chars``: ~1M tokens, the largest context windows
today (defaults per provider: :data:`langorch.domain.templates.PROMPT_CHAR_LIMITS`)."""


class BlockDefinition(_Model):
    """A reusable block stored in the definitions table (seed 000)."""

    block_id: str = Field(pattern=IDENTIFIER)
    name: str = ""
    description: str = ""
    version: int = Field(default=1, ge=1)
    """Assigned by the store: the first stored content is 1, each change the next number."""

    # --- Input/Output contract ---
    input_keys: list[str] = Field(default_factory=list)
    output_keys: list[str] = Field(default_factory=list)
    output_types: dict[
        str, Literal["string", "number", "integer", "boolean", "array", "object"]
    ] = Field(default_factory=dict)
    """Optional JSON type per output key for structured output (default: string)."""

    # --- Execution config ---
    prompt_template: str = ""
    system_prompt: str | None = None
    tools_required: list[str] = Field(default_factory=list)
    llm_provider: str | None = None
    llm_model: str | None = None
    temperature: float | None = Field(default=None, ge=0, le=2)
    max_prompt_chars: int | None = Field(default=None, ge=1_000, le=MAX_PROMPT_CHARS)
    """The longest prompt this block may render (default: its provider's, see
    :data:`langorch.domain.templates.PROMPT_CHAR_LIMITS`)."""
    max_tokens: int | None = Field(default=None, ge=1, le=MAX_OUTPUT_TOKENS)
    """Output token limit of the block's LLM calls (default: the workflow's, else the
    deployment's ``LANGORCH_DEFAULT_LLM_MAX_TOKENS``, else the provider's)."""

    # --- Behaviour ---
    block_type: BlockType = BlockType.action
    branches: dict[str, str] | None = None
    """Decision blocks: the labels (``{"yes": …, "no": …}``). A plan step may map the labels to
    its own step ids; the block's values are used when the step has none."""
    max_retries: int = Field(default=2, ge=0, le=10)
    timeout_seconds: int = Field(default=60, ge=1, le=900)

    # --- Kind-specific ---
    http: HttpSpec | None = None
    memory: MemorySpec | None = None
    read_file: ReadFileSpec | None = None
    transform: dict[str, str] | None = None
    """Output key -> expression (``transform`` blocks)."""

    # --- Metadata ---
    category: str = ""
    tags: list[str] = Field(default_factory=list)
    created_by: str = "system"

    @field_validator("input_keys", "output_keys")
    @classmethod
    def _unique(cls, keys: list[str]) -> list[str]:
        if len(set(keys)) != len(keys):
            raise ValueError("keys must be unique")
        return keys

    def content_hash(self) -> str:
        """Hash of everything but ``version``: identical content is the same block version."""
        return _content_hash(_unset_additions(self.model_dump(mode="json", exclude={"version"})))


class BlockReference(_Model):
    """Lightweight reference to a block, used in plans (seed 000)."""

    block_id: str = Field(pattern=IDENTIFIER)
    step_id: str = Field(pattern=IDENTIFIER)
    input_mappings: dict[str, str] | None = None
    """Block input key -> ``shared_context`` key it is read from."""


# --------------------------------------------------------------------------------------------
# Plans (workflows)
# --------------------------------------------------------------------------------------------


class PlanStep(_Model):
    """One step of a plan: a block reference or an inline control step."""

    step_id: str = Field(pattern=IDENTIFIER)
    block_id: str | None = Field(default=None, pattern=IDENTIFIER)
    block_version: int | None = Field(default=None, ge=1)
    """Pinned when the workflow is stored: ``None`` means the latest version at that moment."""
    kind: BlockType | None = None
    """Inline control steps (approval, wait, loop, subflow, terminate, transform, decision,
    http, read_file).
    When a block is referenced, its ``block_type`` is the kind."""
    name: str = ""
    depends_on: list[str] = Field(default_factory=list)
    branches: dict[str, str] | None = None
    """Outcome label -> next step id (decisions and approvals)."""
    join: Literal["all", "any"] | None = None
    """With several ``depends_on``: wait for all (parallel join) or run after any (branches
    converging). Default: ``any`` when the dependencies lie on different branches of one
    decision, else ``all``."""
    input_mappings: dict[str, str] | None = None
    """Block input key -> ``shared_context`` key it is read from (seed 000 ``BlockReference``)."""

    # --- Decision ---
    condition: str | None = None
    """Decision by expression: a template that renders to a branch label."""
    cases: list[DecisionCase] | None = None
    """Decision by rules: the first true ``when`` picks its branch; ``default_branch`` else."""
    default_branch: str | None = None
    max_iterations: int | None = Field(default=None, ge=1, le=10_000)
    """Bound on how often this step may run in one run (makes a cycle through it legal)."""

    # --- Per-step policies (override the block's) ---
    max_retries: int | None = Field(default=None, ge=0, le=10)
    retry_backoff_seconds: float = Field(default=0.5, ge=0, le=60)
    timeout_seconds: int | None = Field(default=None, ge=1, le=900)
    on_error: str | None = None
    """Step to route to when this step still fails after its retries."""

    # --- LLM overrides ---
    llm_provider: str | None = None
    llm_model: str | None = None

    # --- Inline control settings ---
    approval: ApprovalSpec | None = None
    wait: WaitSpec | None = None
    loop: LoopSpec | None = None
    subflow: SubflowSpec | None = None
    terminate: TerminateSpec | None = None
    transform: dict[str, str] | None = None
    http: HttpSpec | None = None
    memory: MemorySpec | None = None
    read_file: ReadFileSpec | None = None
    """``read_file`` steps (default: the file that started the run, format by its suffix)."""


class ScheduleSpec(_Model):
    """When a schedule trigger fires (seed 000)."""

    cron_expression: str
    """Five-field cron (minute hour day-of-month month day-of-week)."""
    timezone: str = "UTC"
    human_readable: str = ""


class Trigger(_Model):
    """What starts runs of a workflow."""

    type: Literal["schedule", "webhook", "s3", "manual"]
    schedule: ScheduleSpec | None = None
    bucket: str | None = None
    """s3: the bucket to watch (default: the deployment's drop bucket)."""
    prefix: str = ""
    suffix: str = ""
    input: dict[str, Any] = Field(default_factory=dict)
    """Fixed input merged under the event's input (schedules have no other)."""


class InputSchema(_Model):
    """The run's inputs: a small JSON-Schema object (``properties`` and ``required``)."""

    type: Literal["object"] = "object"
    properties: dict[str, dict[str, Any]] = Field(default_factory=dict)
    required: list[str] = Field(default_factory=list)
    additionalProperties: bool = True


class TaskPlan(_Model):
    """A workflow: steps wired by dependencies and branches (seed 000 ``TaskPlan``)."""

    plan_id: str = Field(pattern=IDENTIFIER)
    name: str = ""
    description: str = ""
    user_intent: str = ""
    version: int = Field(default=1, ge=1)
    steps: list[PlanStep] = Field(min_length=1)
    entry_step_id: str | None = None
    """Default: the steps without dependencies."""
    schedule: ScheduleSpec | None = None
    """Seed 000's schedule: the same as a ``schedule`` trigger."""
    triggers: list[Trigger] = Field(default_factory=list)
    inputs_schema: InputSchema | None = None
    on_failure: str | None = None
    """Step to route to when a step fails with no ``on_error`` of its own."""
    llm_provider: str | None = None
    llm_model: str | None = None
    llm_temperature: float | None = Field(default=None, ge=0, le=2)
    """Temperature of the LLM steps whose block sets none."""
    llm_max_tokens: int | None = Field(default=None, ge=1, le=MAX_OUTPUT_TOKENS)
    """Output token limit of the LLM steps whose block sets none."""
    memory: bool = True
    """Load preferences and history before the steps and save history after them."""
    approvers: list[str] = Field(default_factory=list)
    """Default approvers for approval steps that name none."""
    category: str = ""
    tags: list[str] = Field(default_factory=list)
    created_by: str = "system"

    @property
    def workflow_id(self) -> str:
        """The plan id under its platform name."""
        return self.plan_id

    def all_triggers(self) -> list[Trigger]:
        """Triggers including the seed-000 ``schedule`` shorthand."""
        triggers = list(self.triggers)
        if self.schedule is not None and not any(t.type == "schedule" for t in triggers):
            triggers.append(Trigger(type="schedule", schedule=self.schedule))
        return triggers

    def step(self, step_id: str) -> PlanStep:
        """The step with this id (``KeyError`` when absent)."""
        for step in self.steps:
            if step.step_id == step_id:
                return step
        raise KeyError(step_id)

    def content_hash(self) -> str:
        """Hash of everything but ``version``: identical content is the same workflow version."""
        data = _unset_additions(self.model_dump(mode="json", exclude={"version"}))
        data["steps"] = [_unset_additions(step) for step in data["steps"]]
        return _content_hash(data)


_ADDED_FIELDS = ("read_file", "max_prompt_chars", "max_tokens", "llm_temperature", "llm_max_tokens")
"""Fields added to blocks and steps after definitions were first stored. Left out of the hash
while unset, so upgrading langorch does not give every stored definition a new version."""


def _unset_additions(data: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in data.items() if not (k in _ADDED_FIELDS and v is None)}


def _content_hash(data: Any) -> str:
    canonical = json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(canonical.encode()).hexdigest()
