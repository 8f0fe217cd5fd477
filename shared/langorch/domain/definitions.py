"""Blocks and workflows: the definitions users write, store and version.

The names and fields of seed 000 (``BlockDefinition``, ``BlockType``, ``BlockReference``,
``PlanStep``, ``TaskPlan``, ``ScheduleSpec``) are the public vocabulary. They are extended here,
never renamed: a block or plan written as in seed 000 loads and runs unchanged.

A *block* is reusable data describing one unit of work. A *workflow* (``TaskPlan``) wires steps
together; each step either references a block (``block_id``) or declares a control ``kind``
inline (approval, wait, loop, subflow, terminate, transform, http, read_file, decision by
condition). Each kind's settings model lives with the kind (:mod:`langorch.domain.kinds`) and is
re-exported here under its seed-era name.

These models check shapes only. Cross-references (unknown blocks, unreachable steps, cycles,
cron syntax, …) are checked by :mod:`langorch.domain.validation`, which reports every problem at
once with its path.
"""

from __future__ import annotations

import hashlib
import json
import re
from enum import StrEnum
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, PlainSerializer, PlainValidator, field_validator

from langorch.domain.budgets import BudgetSpec
from langorch.domain.concurrency import ConcurrencySpec
from langorch.domain.flow_control import FlowControl, TriggerFlow
from langorch.domain.prices import TokenPrice
from langorch.domain.step_settings import (
    ASK,
    IDENTIFIER,
    READ_FILE_DEFAULT_BYTES,
    READ_FILE_MAX_BYTES,
    ApprovalSpec,
    AskSpec,
    DecisionCase,
    HttpSpec,
    InputMapping,
    LoopSpec,
    MemorySpec,
    ReadFileFormat,
    ReadFileSpec,
    StepHooks,
    SubflowSpec,
    TerminateSpec,
    WaitSpec,
)
from langorch.domain.tool_policies import ToolPolicy

__all__ = [
    "ASK",
    "DEFAULT_MAX_PARALLEL",
    "IDENTIFIER",
    "LLM_KINDS",
    "READ_FILE_DEFAULT_BYTES",
    "READ_FILE_MAX_BYTES",
    "RESERVED_STEP_IDS",
    "ApprovalSpec",
    "AskSpec",
    "BlockDefinition",
    "BlockReference",
    "BlockType",
    "DecisionCase",
    "HttpSpec",
    "InputMapping",
    "InputSchema",
    "KindName",
    "LoopSpec",
    "MemorySpec",
    "PlanStep",
    "ReadFileFormat",
    "ReadFileSpec",
    "ScheduleSpec",
    "StepHooks",
    "StepKindName",
    "SubflowSpec",
    "TaskPlan",
    "TerminateSpec",
    "Trigger",
    "WaitSpec",
]

DEFAULT_MAX_PARALLEL = 10
"""Steps of one run that run at once when its workflow sets no ``max_parallel``: parallel
branches (and the parallel steps inside a loop's round) wait their turn past it, so one run
never opens more LLM, tool or HTTP calls at once than providers' rate limits usually allow."""

MAX_OUTPUT_TOKENS = 200_000
"""Upper bound of ``max_tokens``: above any model's output limit, so only typos are refused."""

RESERVED_STEP_IDS = frozenset(
    {"load_memory", "save_memory", "handle_error", "__start__", "__end__"}
)
"""Node names the compiler adds around the plan's steps."""


class BlockType(StrEnum):
    """What a step does. Seed 000's five kinds plus the control kinds of the orchestrator.

    These are the built-in kinds; a kind registered later (:mod:`langorch.domain.kinds`)
    parses to a :class:`KindName` instead.
    """

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


_KIND_NAME = re.compile(r"^[a-z][a-z0-9_]{0,63}$")


class KindName(str):
    """The name of a kind registered after the built-ins (a plugin's or a test's).

    Built-in kinds parse to :class:`BlockType` members; any other kind name parses to a
    ``KindName`` (validation reports one that is not registered), which has ``value`` too, so
    code written for ``BlockType`` reads both alike.
    """

    __slots__ = ()

    @property
    def value(self) -> str:
        """The name itself (as ``BlockType.value``)."""
        return str(self)


def _parse_kind(value: Any) -> BlockType | KindName:
    if isinstance(value, BlockType):
        return value
    if not isinstance(value, str):
        raise ValueError(f"a kind is a name, got {type(value).__name__}")
    if value in BlockType.__members__:
        return BlockType(value)
    if not _KIND_NAME.match(value):
        raise ValueError(
            f"{value!r} is not a kind name; use a built-in kind "
            f"({', '.join(BlockType.__members__)}) or a registered one"
        )
    # Whether a kind of this name is registered is validation's question (it reports the
    # step's path and the registered names); the model only checks the shape.
    return KindName(value)


StepKindName = Annotated[
    BlockType | KindName,
    PlainValidator(_parse_kind),
    PlainSerializer(lambda kind: str(kind.value), return_type=str, when_used="json"),
]
"""A step kind: a :class:`BlockType` for built-ins, else the :class:`KindName` of a kind
registered in :mod:`langorch.domain.kinds.registry` (checked by validation)."""


def _unset(value: Any) -> bool:
    return value is None


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)


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
    block_type: StepKindName = BlockType.action
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
    settings: dict[str, Any] | None = Field(default=None, exclude_if=_unset)
    """Settings of a kind registered outside the built-ins (checked by its settings model).
    Left out of dumps while unset, so stored definitions keep their format."""

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
    kind: StepKindName | None = None
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
    input_mappings: dict[str, str | InputMapping] | None = None
    """Input key -> the ``shared_context`` key it is read from (seed 000 ``BlockReference``), a
    dotted path into one (``request.user.name``) or a step's result (``analyze.output``); or
    ``{path, required, default}`` (seed 004's required and optional mappings)."""

    # --- Decision ---
    condition: str | None = None
    """Decision by expression: a template that renders to a branch label."""
    cases: list[DecisionCase] | None = None
    """Decision by rules: the first true ``when`` picks its branch; ``default_branch`` else."""
    default_branch: str | None = None
    max_iterations: int | None = Field(default=None, ge=1, le=10_000)
    """Bound on how often this step may run in one run (makes a cycle through it legal). When
    the run comes back to it once more, the step does not run: the outcome is
    ``LoopLimitReached``, routed by ``on_max_iterations``, else the run fails."""
    on_max_iterations: str | None = Field(default=None, exclude_if=_unset)
    """Step to go to when the step's bound is reached (``max_iterations``; for a loop step, its
    loop's bound too). Left out of dumps while unset."""

    # --- Per-step policies (override the block's) ---
    max_retries: int | None = Field(default=None, ge=0, le=10)
    retry_backoff_seconds: float = Field(default=0.5, ge=0, le=60)
    timeout_seconds: int | None = Field(default=None, ge=1, le=900)
    on_error: str | None = None
    """Step to route to when this step still fails after its retries; ``ask``: ask a person to
    fix it (retry with edited inputs, skip giving its outputs, or fail the run)."""
    hooks: StepHooks | None = Field(default=None, exclude_if=_unset)
    """Transforms or tool calls before (``pre``) and after (``post``) the step's own work
    (seed 004's hooks on action nodes). Left out of dumps while unset."""
    ask: AskSpec | None = Field(default=None, exclude_if=_unset)
    """Who is asked when this step fails and asks (``on_error: ask``, or the workflow's
    ``on_failure: ask``); replaces the workflow's ``ask``. Left out of dumps while unset."""
    resource: str | None = Field(default=None, exclude_if=_unset)
    """A resource the step holds a lease on while it runs (``browser:session-1``; seed 001
    §7b): a literal name whose ``concurrency_limit`` is declared per deployment
    (``langorch resources set``, default 1). Left out of dumps while unset."""

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
    settings: dict[str, Any] | None = Field(default=None, exclude_if=_unset)
    """Settings of a kind registered outside the built-ins (checked by its settings model).
    Left out of dumps while unset, so stored definitions keep their format."""


class ScheduleSpec(_Model):
    """When a schedule trigger fires (seed 000)."""

    cron_expression: str
    """Five-field cron (minute hour day-of-month month day-of-week)."""
    timezone: str = "UTC"
    human_readable: str = ""


class Trigger(_Model, TriggerFlow):
    """What starts runs of a workflow, and its flow control
    (:mod:`langorch.domain.flow_control`)."""

    type: Literal["schedule", "webhook", "s3", "manual", "event"]
    schedule: ScheduleSpec | None = None
    bucket: str | None = None
    """s3: the bucket to watch (default: the deployment's drop bucket)."""
    prefix: str = ""
    suffix: str = ""
    input: dict[str, Any] = Field(default_factory=dict)
    """Fixed input merged under the event's input (schedules have no other)."""
    sender_field: str | None = Field(default=None, exclude_if=_unset)
    """webhook: the body's key naming who sent the delivery (an email address). It is covered by
    the signature, so it is recorded as the run's starter, whom an approval with
    ``separation_of_duties`` does not ask. Left out of dumps while unset."""
    bus: str | None = Field(default=None, exclude_if=_unset)
    """event: the EventBridge bus whose events it matches (default: ``default``)."""
    pattern: dict[str, Any] | None = Field(default=None, exclude_if=_unset)
    """event: the EventBridge event pattern (:mod:`langorch.domain.event_patterns`)."""
    event_input: Literal["detail", "event"] | None = Field(default=None, exclude_if=_unset)
    """event: what the run gets over ``input``: the event's ``detail`` (default) or the whole
    event."""


class InputSchema(_Model):
    """The run's inputs: a small JSON-Schema object (``properties`` and ``required``)."""

    type: Literal["object"] = "object"
    properties: dict[str, dict[str, Any]] = Field(default_factory=dict)
    required: list[str] = Field(default_factory=list)
    additionalProperties: bool = True


class TaskPlan(_Model, FlowControl):
    """A workflow: steps wired by dependencies and branches (seed 000 ``TaskPlan``); its
    flow-control keys (``rate_limit``, ``singleton``, …) are in
    :mod:`langorch.domain.flow_control`."""

    plan_id: str = Field(pattern=IDENTIFIER)
    name: str = ""
    description: str = ""
    user_intent: str = ""
    version: int = Field(default=1, ge=1)
    steps: list[PlanStep] = Field(min_length=1)
    entry_step_id: str | None = None
    """Default: the steps without dependencies."""
    chain: list[str] | None = Field(default=None, exclude_if=_unset)
    """Steps that run one after another (seed 004's ``chain([...])``): each listed step runs
    after the one listed before it, as if it named it in ``depends_on``. Left out of dumps
    while unset."""
    schedule: ScheduleSpec | None = None
    """Seed 000's schedule: the same as a ``schedule`` trigger."""
    triggers: list[Trigger] = Field(default_factory=list)
    inputs_schema: InputSchema | None = None
    on_failure: str | None = None
    """Step to route to when a step fails with no ``on_error`` of its own; ``ask``: ask a
    person to fix it (steps that park — approval, wait, loop, subflow — fail as before)."""
    ask: AskSpec | None = Field(default=None, exclude_if=_unset)
    """Who is asked to fix a failed step that asks (default approvers: ``approvers``). Left out
    of dumps while unset."""
    llm_provider: str | None = None
    llm_model: str | None = None
    llm_temperature: float | None = Field(default=None, ge=0, le=2)
    """Temperature of the LLM steps whose block sets none."""
    llm_max_tokens: int | None = Field(default=None, ge=1, le=MAX_OUTPUT_TOKENS)
    """Output token limit of the LLM steps whose block sets none."""
    memory: bool = True
    """Load preferences and history before the steps and save history after them."""
    remember: list[str] = Field(default_factory=list, exclude_if=lambda keys: not keys)
    """``shared_context`` keys the run's last node keeps, as they are, in the user's history of
    the workflow (``user_history[i].summary.context`` in later runs; seed 000's ``save_memory``
    "persists shared_context"). Left out of dumps while empty."""
    approvers: list[str] = Field(default_factory=list)
    """Default approvers for approval steps that name none."""
    max_parallel: int | None = Field(default=None, ge=1, le=100, exclude_if=_unset)
    """Steps of a run that may run at once (default :data:`DEFAULT_MAX_PARALLEL`): parallel
    branches past it wait their turn. A for-each runs its items one after another, so this caps
    the parallel steps inside each round. Left out of dumps while unset."""
    category: str = ""
    tags: list[str] = Field(default_factory=list)
    created_by: str = "system"
    prices: dict[str, TokenPrice] | None = Field(default=None, exclude_if=_unset)
    """This workflow's LLM prices by ``"provider/model"`` (US dollars per million tokens),
    over the deployment's (:mod:`langorch.domain.prices`). Left out of dumps while unset."""
    budget: BudgetSpec | None = Field(default=None, exclude_if=_unset)
    """What one run may spend on LLM calls, and who is asked past it
    (:mod:`langorch.domain.budgets`). Left out of dumps while unset."""
    concurrency: ConcurrencySpec | None = Field(default=None, exclude_if=_unset)
    """At most ``limit`` runs per rendered ``key`` at once; the rest wait ``queued`` in order
    (:mod:`langorch.domain.concurrency`). Left out of dumps while unset."""
    tool_policies: list[ToolPolicy] | None = Field(default=None, exclude_if=_unset)
    """Rules over the tool calls its LLM steps make: allow, deny or require approval
    (:mod:`langorch.domain.tool_policies`). Left out of dumps while unset."""
    ckp: str | None = Field(default=None, exclude_if=_unset)
    """The CKP procedure this plan was compiled from, as JSON text in the author's key order
    (:mod:`langorch.domain.ckp`): what ``workflows show`` prints and ``export --ckp`` writes.
    Left out of dumps while unset."""

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
        if data.get("ckp"):
            # The document's content, not its layout: the same procedure re-indented is the
            # same version.
            data["ckp"] = json.loads(data["ckp"])
        return _content_hash(data)


_ADDED_FIELDS = (
    "read_file",
    "max_prompt_chars",
    "max_tokens",
    "llm_temperature",
    "llm_max_tokens",
    "settings",
    "resource",
    "on_max_iterations",
    "max_parallel",
    "chain",
    "hooks",
    "ckp",
    "ask",
    "prices",
    "budget",
    "tool_policies",
)
"""Fields added to blocks and steps after definitions were first stored. Left out of the hash
while unset, so upgrading langorch does not give every stored definition a new version."""


def _unset_additions(data: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in data.items() if not (k in _ADDED_FIELDS and v is None)}


def _content_hash(data: Any) -> str:
    canonical = json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(canonical.encode()).hexdigest()
