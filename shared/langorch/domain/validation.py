"""Validation of blocks and workflows before anything is stored or runs (001 §4.1).

Every problem is reported at once, each with its path in the definition (``steps[3].branches.yes``)
and a hint; validation never stops at the first problem. A definition that fails validation is
never stored and never compiled.

:func:`step_graph` resolves a plan's topology (:class:`StepGraph`): the compiler builds the
LangGraph graph from it, so validation and compilation agree on what every edge means.

Topology rules:

* ``depends_on: [A]`` on step ``S`` is an edge ``A → S`` (kind ``next``).
* A decision or approval ``D`` with ``branches {label: T}`` has an edge ``D → T`` (kind ``branch``);
  ``T`` may also list ``D`` in ``depends_on``. Depending on a decision or approval without being
  one of its branch targets is a problem.
* A loop ``L``: body *entries* (body steps with no dependency inside the body) get ``L → entry``
  (``loop_body``); body *exits* (no successor inside the body) get ``exit → L`` (``loop_back``);
  steps that depend on ``L`` outside the body run after the loop (``loop_done``).
* ``on_error`` (``on_error``), an approval's ``on_max_iterations`` (``on_max_iterations``), and the
  plan's ``on_failure`` (``on_failure``, from every step that has no ``on_error`` and is not on the
  failure route itself).
* Entry steps: ``entry_step_id``; else every step with no ``depends_on`` that is not a loop body
  member, not an error route (``on_error``/``on_failure``/``on_max_iterations`` target) and not a
  branch target — except a branch target that leads back to the step branching to it (the first
  step of a review loop: it runs first, and again after a rejection).
* A cycle is legal only through a loop's back-edge, or through a step with ``max_iterations`` or
  an approval with ``approval.max_iterations``. Error routes (``on_error``) count; ``on_failure``
  does not (a failure inside the failure route ends the run instead of routing again).
"""

from __future__ import annotations

import difflib
import re
from collections import deque
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime
from types import MappingProxyType
from typing import Any, Literal, Protocol, TypeVar
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from langorch.domain.definitions import (
    LLM_KINDS,
    RESERVED_STEP_IDS,
    ApprovalSpec,
    BlockDefinition,
    BlockType,
    HttpSpec,
    PlanStep,
    ReadFileSpec,
    ScheduleSpec,
    TaskPlan,
    engine_outputs,
)
from langorch.domain.errors import DefinitionError, Problem
from langorch.domain.templates import (
    TemplateError,
    check,
    check_expression,
    is_jinja,
    placeholders,
    strip_braces,
)

# --------------------------------------------------------------------------------------------
# Public vocabulary
# --------------------------------------------------------------------------------------------

EdgeKind = Literal[
    "next", "branch", "loop_body", "loop_back", "loop_done", "on_error", "on_max_iterations",
    "on_failure",
]  # fmt: skip
"""How control moves along an edge (see the module docstring)."""

Join = Literal["all", "any"]

BUILTIN_KEYS = frozenset({"run_id", "error", "user_id", "user_preferences", "user_history"})
"""Names every step can read without any step or input providing them."""

S3_INPUT_KEYS = frozenset({"bucket", "key", "size", "etag", "version_id"})
"""What a run started by an ``s3`` trigger has in its input (the object that was dropped)."""

APPROVAL_LABELS = ("approved", "rejected", "timed_out")
"""The outcomes of an approval step."""

BRANCHING_KINDS = frozenset({BlockType.decision, BlockType.approval})

_FORWARD: frozenset[EdgeKind] = frozenset(
    {"next", "branch", "loop_body", "loop_done", "on_max_iterations"}
)
"""Edges of the normal flow: what runs after what on the way to the end."""
_CYCLE_EDGES: frozenset[EdgeKind] = _FORWARD | {"on_error"}
"""Edges a forbidden cycle may use (loop back-edges are legal; on_failure never re-routes)."""
_JOIN_EDGES: frozenset[EdgeKind] = frozenset({"next", "branch", "loop_done"})
"""Incoming edges a step joins on."""

_KEY = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z0-9_]+)*$")
_JINJA_NAMES = frozenset(
    {"range", "dict", "lipsum", "cycler", "joiner", "namespace", "loop", "self", "caller"}
)
"""Names Jinja itself provides inside templates; never inputs."""

_STEP_SETTINGS: dict[str, frozenset[BlockType]] = {
    "approval": frozenset({BlockType.approval}),
    "wait": frozenset({BlockType.wait}),
    "loop": frozenset({BlockType.loop}),
    "subflow": frozenset({BlockType.subflow}),
    "terminate": frozenset({BlockType.terminate}),
    "transform": frozenset({BlockType.transform}),
    "http": frozenset({BlockType.http}),
    "memory": frozenset({BlockType.query_memory, BlockType.save_memory}),
    "read_file": frozenset({BlockType.read_file}),
    "condition": frozenset({BlockType.decision}),
    "cases": frozenset({BlockType.decision}),
    "default_branch": frozenset({BlockType.decision}),
    "branches": BRANCHING_KINDS,
}
"""Which kinds use each kind-specific setting: a setting on another kind would be ignored."""

_BLOCK_SETTINGS: dict[str, frozenset[BlockType]] = {
    "http": frozenset({BlockType.http}),
    "memory": frozenset({BlockType.query_memory, BlockType.save_memory}),
    "read_file": frozenset({BlockType.read_file}),
    "transform": frozenset({BlockType.transform}),
    "branches": BRANCHING_KINDS,
}


_D = TypeVar("_D", BlockDefinition, TaskPlan)


class DefinitionLookup(Protocol):
    """Where validation finds the blocks and workflows a plan refers to."""

    def get_block(self, block_id: str, version: int | None = None) -> BlockDefinition | None:
        """The block at this version (``None``: the latest), or ``None`` when absent."""
        ...

    def get_workflow(self, workflow_id: str, version: int | None = None) -> TaskPlan | None:
        """The workflow at this version (``None``: the latest), or ``None`` when absent."""
        ...


class InMemoryLookup:
    """A :class:`DefinitionLookup` over definitions held in memory (tests, ``validate``, local)."""

    def __init__(
        self,
        blocks: Iterable[BlockDefinition] = (),
        workflows: Iterable[TaskPlan] = (),
    ) -> None:
        """Index the definitions by id and version; a later one replaces an equal id+version.

        Args:
            blocks: Block definitions (any versions).
            workflows: Workflow definitions (any versions).
        """
        self._blocks: dict[str, dict[int, BlockDefinition]] = {}
        self._workflows: dict[str, dict[int, TaskPlan]] = {}
        for block in blocks:
            self.add_block(block)
        for plan in workflows:
            self.add_workflow(plan)

    def add_block(self, block: BlockDefinition) -> None:
        """Add (or replace) one block version."""
        self._blocks.setdefault(block.block_id, {})[block.version] = block

    def add_workflow(self, plan: TaskPlan) -> None:
        """Add (or replace) one workflow version."""
        self._workflows.setdefault(plan.plan_id, {})[plan.version] = plan

    def get_block(self, block_id: str, version: int | None = None) -> BlockDefinition | None:
        """The block at this version (``None``: the latest), or ``None`` when absent."""
        return _pick(self._blocks.get(block_id), version)

    def get_workflow(self, workflow_id: str, version: int | None = None) -> TaskPlan | None:
        """The workflow at this version (``None``: the latest), or ``None`` when absent."""
        return _pick(self._workflows.get(workflow_id), version)

    def blocks(self) -> list[BlockDefinition]:
        """The latest version of every block."""
        return [versions[max(versions)] for versions in self._blocks.values()]

    def workflows(self) -> list[TaskPlan]:
        """The latest version of every workflow."""
        return [versions[max(versions)] for versions in self._workflows.values()]


def _cron_is_valid(expression: str) -> bool:
    # Imported here: the runner validates topology on every cold compile and never needs cron
    # (croniter costs ~0.5x an `import boto3`).
    from croniter import croniter

    return bool(croniter.is_valid(expression))


def _pick(versions: dict[int, _D] | None, version: int | None) -> _D | None:
    if not versions:
        return None
    return versions.get(max(versions) if version is None else version)


@dataclass(frozen=True)
class Edge:
    """One edge of the step graph."""

    source: str
    target: str
    kind: EdgeKind
    label: str | None = None
    """The branch label (``branch`` edges only)."""


@dataclass(frozen=True)
class LoopInfo:
    """A for-each loop step, resolved."""

    step_id: str
    body: tuple[str, ...]
    """Direct body members in plan order (a nested loop's own body belongs to that loop)."""
    entries: tuple[str, ...]
    """Body steps each iteration starts with (``loop_body`` edges from the loop step)."""
    exits: tuple[str, ...]
    """Body steps after which an iteration ends (``loop_back`` edges to the loop step)."""
    done: tuple[str, ...]
    """Steps that run once, after the last iteration (``loop_done`` edges)."""
    item_key: str
    index_key: str
    collect: tuple[str, ...]
    """Keys collected from each iteration (``loop.collect``, else the body steps' outputs)."""
    collect_key: str
    """Where the collected list goes (``loop.collect_key``, else ``<step_id>_results``)."""


@dataclass(frozen=True)
class StepNode:
    """One step of the plan, resolved."""

    step_id: str
    index: int
    """Position in ``plan.steps`` (paths in problems are ``steps[index]``)."""
    step: PlanStep
    kind: BlockType | None
    """``step.kind`` or the block's ``block_type``; ``None`` only in an invalid plan."""
    block: BlockDefinition | None
    """The referenced block at the resolved version; ``None`` for inline steps."""
    branches: Mapping[str, str]
    """Label -> target step id: the step's branches, else the block's (decisions, approvals)."""
    join: Join
    """With several incoming ``next``/``branch``/``loop_done`` edges: wait for ``all`` or run
    after ``any`` (explicit ``join``, else ``any`` when two of them lie on different branches of
    one decision/approval or one closes a review cycle, else ``all``)."""
    loop: str | None
    """The innermost loop whose body this step is in."""
    outputs: frozenset[str]
    """``shared_context`` keys this step writes."""
    error_route: str | None
    """Where a failure after the retries goes: ``on_error``, else the plan's ``on_failure`` (unless
    the step is on the failure route itself), else ``None`` (the run fails)."""


@dataclass(frozen=True)
class StepGraph:
    """The resolved topology of a plan, shared by validation and the compiler."""

    plan_id: str
    steps: Mapping[str, StepNode]
    """Every step by id, in plan order."""
    edges: tuple[Edge, ...]
    entry: tuple[str, ...]
    """Steps that run first (from ``START``), in plan order."""
    loops: Mapping[str, LoopInfo]
    """Every loop step by id."""
    on_failure: str | None
    terminals: tuple[str, ...]
    """Steps outside loop bodies with no ``next``/``branch``/``loop_done``/``on_max_iterations``
    successor: the run ends after them."""
    _out: Mapping[str, tuple[Edge, ...]] = field(repr=False, compare=False)
    _in: Mapping[str, tuple[Edge, ...]] = field(repr=False, compare=False)

    def successors(self, step_id: str, *kinds: EdgeKind) -> tuple[Edge, ...]:
        """Outgoing edges of a step, optionally only of these kinds, in a stable order."""
        edges = self._out.get(step_id, ())
        return tuple(e for e in edges if e.kind in kinds) if kinds else edges

    def predecessors(self, step_id: str, *kinds: EdgeKind) -> tuple[Edge, ...]:
        """Incoming edges of a step, optionally only of these kinds, in a stable order."""
        edges = self._in.get(step_id, ())
        return tuple(e for e in edges if e.kind in kinds) if kinds else edges

    def branch_targets(self, step_id: str) -> Mapping[str, str]:
        """Label -> target of a decision or approval (empty for other steps)."""
        return self.steps[step_id].branches


# --------------------------------------------------------------------------------------------
# Public functions
# --------------------------------------------------------------------------------------------


def validate_block(
    block: BlockDefinition, *, tools: frozenset[str], providers: frozenset[str]
) -> list[Problem]:
    """Every problem of a block on its own.

    Args:
        block: The block.
        tools: Names of the registered tools.
        providers: Names of the available LLM providers.

    Returns:
        The problems (empty when the block is valid), paths relative to the block.
    """
    return _block_problems(block, tools=tools, providers=providers)


def ensure_valid_block(
    block: BlockDefinition, *, tools: frozenset[str], providers: frozenset[str]
) -> None:
    """Raise when a block has problems.

    Raises:
        DefinitionError: ``block <id>`` with every problem.
    """
    problems = validate_block(block, tools=tools, providers=providers)
    if problems:
        raise DefinitionError(f"block {block.block_id}", problems)


def validate_workflow(
    plan: TaskPlan,
    lookup: DefinitionLookup,
    *,
    tools: frozenset[str],
    providers: frozenset[str],
) -> list[Problem]:
    """Every problem of a workflow, with the blocks and workflows it refers to.

    Args:
        plan: The workflow.
        lookup: Where referenced blocks and subflow workflows are found.
        tools: Names of the registered tools.
        providers: Names of the available LLM providers.

    Returns:
        The problems (empty when the workflow is valid), paths relative to the workflow.
    """
    return _Analysis(plan, lookup, tools=tools, providers=providers).problems


def ensure_valid_workflow(
    plan: TaskPlan,
    lookup: DefinitionLookup,
    *,
    tools: frozenset[str],
    providers: frozenset[str],
) -> None:
    """Raise when a workflow has problems.

    Raises:
        DefinitionError: ``workflow <plan_id>`` with every problem.
    """
    problems = validate_workflow(plan, lookup, tools=tools, providers=providers)
    if problems:
        raise DefinitionError(f"workflow {plan.plan_id}", problems)


def step_graph(plan: TaskPlan, lookup: DefinitionLookup) -> StepGraph:
    """The resolved topology of a valid plan.

    Everything but the tool and provider registries is checked again, so a compiler never builds
    a graph from an invalid plan.

    Args:
        plan: The workflow.
        lookup: Where referenced blocks (at the pinned versions) are found.

    Returns:
        The step graph.

    Raises:
        DefinitionError: ``workflow <plan_id>`` with every problem, when the plan is invalid.
    """
    analysis = _Analysis(plan, lookup, tools=None, providers=None)
    if analysis.problems:
        raise DefinitionError(f"workflow {plan.plan_id}", analysis.problems)
    return analysis.graph


# --------------------------------------------------------------------------------------------
# Blocks
# --------------------------------------------------------------------------------------------


def _block_problems(
    block: BlockDefinition, *, tools: frozenset[str] | None, providers: frozenset[str] | None
) -> list[Problem]:
    problems: list[Problem] = []
    add = problems.append
    kind = block.block_type
    if tools is not None:
        for j, tool in enumerate(block.tools_required):
            if tool not in tools:
                add(_unknown_tool(f"tools_required[{j}]", tool, tools))
    if providers is not None and block.llm_provider and block.llm_provider not in providers:
        add(_unknown_provider("llm_provider", block.llm_provider, providers))
    for name, kinds in _BLOCK_SETTINGS.items():
        if getattr(block, name) is not None and kind not in kinds:
            add(_ignored_setting(name, kind))
    for key in block.output_types:
        if key not in block.output_keys:
            add(
                Problem(
                    f"output_types.{key}",
                    f"{key!r} is not one of the output_keys",
                    "add it to output_keys or remove its type",
                )
            )
    if kind in LLM_KINDS and not block.prompt_template.strip():
        add(
            Problem(
                "prompt_template",
                f"an {kind.value} block needs a prompt_template",
                "write the instructions for the LLM, with {placeholders} for the input keys",
            )
        )
    if kind is BlockType.http and block.http is None:
        add(Problem("http", "an http block needs http settings", "add http: {url: ...}"))
    if kind is BlockType.transform and not block.transform:
        add(
            Problem(
                "transform",
                "a transform block needs transform expressions",
                "add transform: {output_key: expression}",
            )
        )
    # Templates of a block read the step's inputs: the block's input keys and the built-ins.
    readable = frozenset(block.input_keys) | BUILTIN_KEYS
    for path, template in (
        ("prompt_template", block.prompt_template),
        ("system_prompt", block.system_prompt or ""),
    ):
        problems.extend(_template_reads(path, template, readable, "template"))
    if block.http is not None:
        for path, template, how in _http_templates("http", block.http):
            problems.extend(_template_reads(path, template, readable, how))
    if kind is BlockType.read_file:
        # Without settings the block reads the run's {{ bucket }} / {{ key }}: inputs too.
        for path, template, how in _read_file_templates(
            "read_file", block.read_file or ReadFileSpec()
        ):
            problems.extend(_template_reads(path, template, readable, how))
    for key, expression in (block.transform or {}).items():
        problems.extend(_template_reads(f"transform.{key}", expression, readable, "expression"))
    return problems


def _template_reads(
    path: str, text: str, readable: frozenset[str], how: Literal["template", "expression"]
) -> list[Problem]:
    """Syntax errors, else names a block template reads that are not among its inputs."""
    error = check(text) if how == "template" else check_expression(text)
    if error is not None:
        return [_syntax_problem(path, how, error)]
    return [
        Problem(
            path,
            f"reads {name!r}, which is not one of the block's input_keys",
            f"add {name!r} to input_keys, or fix the name",
        )
        for name in sorted(_names(text, how) - readable)
    ]


# --------------------------------------------------------------------------------------------
# Workflows
# --------------------------------------------------------------------------------------------


class _Analysis:
    """One pass over a plan: resolves the graph and collects every problem."""

    def __init__(
        self,
        plan: TaskPlan,
        lookup: DefinitionLookup,
        *,
        tools: frozenset[str] | None,
        providers: frozenset[str] | None,
    ) -> None:
        self.plan = plan
        self.lookup = lookup
        self.tools = tools
        self.providers = providers
        self.problems: list[Problem] = []
        self.index: dict[str, int] = {}
        self.blocks: dict[str, BlockDefinition | None] = {}
        self.kinds: dict[str, BlockType | None] = {}
        self.branches: dict[str, dict[str, str]] = {}
        self.loop_of: dict[str, str] = {}
        self.edges: list[Edge] = []
        self.outputs: dict[str, frozenset[str]] = {}
        self.dangling: set[str] = set()
        """Steps with a dependency that could not be wired (already reported)."""
        self._run()

    # -- helpers ------------------------------------------------------------------------------

    def add(self, path: str, message: str, hint: str = "") -> None:
        self.problems.append(Problem(path, message, hint))

    def sp(self, step_id: str) -> str:
        """The path of a step."""
        return f"steps[{self.index[step_id]}]"

    def known(self, step_id: str | None) -> bool:
        return step_id is not None and step_id in self.index

    # -- the pass -----------------------------------------------------------------------------

    def _run(self) -> None:
        plan = self.plan
        self._ids()
        for i, step in enumerate(plan.steps):
            if plan.steps[self.index[step.step_id]] is step:
                self._resolve(i, step)
        self._loops()
        self._wire()
        loops = self._loop_infos()
        self._error_routes()
        out, inc = self._adjacency()
        entry = self._entry(out)
        self._reachability(entry, out)
        self._cycles(out)
        joins = self._joins(out, inc)
        self._kind_checks()
        self._plan_checks()
        for step_id in self.index:
            self.outputs[step_id] = self._step_outputs(step_id, loops)
        self._inputs(inc, loops)
        self._registries()
        self.graph = self._graph(entry, joins, loops, out, inc)

    def _ids(self) -> None:
        for i, step in enumerate(self.plan.steps):
            sid = step.step_id
            if sid in RESERVED_STEP_IDS:
                self.add(
                    f"steps[{i}].step_id",
                    f"{sid!r} is reserved for a node the compiler adds",
                    f"rename the step; reserved ids are {', '.join(sorted(RESERVED_STEP_IDS))}",
                )
            if sid in self.index:
                self.add(
                    f"steps[{i}].step_id",
                    f"step id {sid!r} is already used by steps[{self.index[sid]}]",
                    "give every step its own id",
                )
            else:
                self.index[sid] = i

    def _resolve(self, i: int, step: PlanStep) -> None:
        """The block and the kind of one step."""
        sid = step.step_id
        path = f"steps[{i}]"
        block: BlockDefinition | None = None
        kind: BlockType | None = step.kind
        if step.block_id is not None:
            block = self.lookup.get_block(step.block_id, step.block_version)
            if block is None:
                latest = self.lookup.get_block(step.block_id)
                if step.block_version is not None and latest is not None:
                    self.add(
                        f"{path}.block_version",
                        f"block {step.block_id!r} has no version {step.block_version}",
                        f"the latest version is {latest.version}; pin an existing version",
                    )
                else:
                    self.add(
                        f"{path}.block_id",
                        f"unknown block {step.block_id!r}",
                        "register the block first (langorch blocks put), or fix the id",
                    )
            else:
                if step.kind is not None and step.kind is not block.block_type:
                    self.add(
                        f"{path}.kind",
                        f"kind {step.kind.value!r} contradicts block {block.block_id!r}, "
                        f"which is a {block.block_type.value!r} block",
                        "remove kind (the block's type is the step's kind), or use another block",
                    )
                kind = block.block_type
        elif step.kind is None:
            self.add(
                path,
                f"step {sid!r} has neither block_id nor kind",
                "set block_id to a registered block, or kind to an inline kind "
                "(approval, wait, loop, subflow, terminate, transform, decision, http, "
                "read_file)",
            )
        elif step.kind in LLM_KINDS:
            self.add(
                f"{path}.kind",
                f"an inline {step.kind.value} step has no prompt or output keys",
                "reference a block (block_id) that defines the prompt and output_keys",
            )
        self.blocks[sid] = block
        self.kinds[sid] = kind
        labels = step.branches if step.branches is not None else (block.branches if block else None)
        self.branches[sid] = dict(labels or {}) if kind in BRANCHING_KINDS else {}

    def _loops(self) -> None:
        """Loop body membership: each step is a direct member of at most one loop."""
        for step in self._steps():
            if self.kinds[step.step_id] is not BlockType.loop or step.loop is None:
                continue
            path = f"{self.sp(step.step_id)}.loop.body"
            seen: set[str] = set()
            for j, member in enumerate(step.loop.body):
                if member == step.step_id:
                    self.add(
                        f"{path}[{j}]",
                        "a loop cannot contain itself",
                        "list only the steps to repeat",
                    )
                elif not self.known(member):
                    self.add(f"{path}[{j}]", *_unknown_step(member, self.index))
                elif member in seen:
                    self.add(f"{path}[{j}]", f"{member!r} is listed twice", "list it once")
                elif member in self.loop_of:
                    self.add(
                        f"{path}[{j}]",
                        f"{member!r} is already in the body of loop {self.loop_of[member]!r}",
                        "a step belongs to one loop; nest the loops instead",
                    )
                else:
                    self.loop_of[member] = step.step_id
                seen.add(member)
        # A loop nested in its own body (directly or not) would never start.
        for loop_id in {*self.loop_of.values()}:
            chain = [loop_id]
            while chain[-1] in self.loop_of and self.loop_of[chain[-1]] not in chain:
                chain.append(self.loop_of[chain[-1]])
            if chain[-1] in self.loop_of and self.loop_of[chain[-1]] in chain:
                self.add(
                    f"{self.sp(loop_id)}.loop.body",
                    f"loop {loop_id!r} is inside its own body through {' → '.join(chain)}",
                    "nest loops in one direction only",
                )
                for member in chain:
                    self.loop_of.pop(member, None)

    def _wire(self) -> None:
        """``next``, ``branch``, ``loop_body`` and ``loop_done`` edges."""
        for step in self._steps():
            sid = step.step_id
            reported = len(self.problems)
            for j, dep in enumerate(step.depends_on):
                path = f"{self.sp(sid)}.depends_on[{j}]"
                if not self.known(dep):
                    self.add(path, *_unknown_step(dep, self.index))
                    continue
                if dep == sid:
                    self.add(path, "a step cannot depend on itself", "remove it")
                    continue
                dep_kind = self.kinds[dep]
                if dep_kind in BRANCHING_KINDS:
                    if sid not in self.branches[dep].values():
                        what = "decision" if dep_kind is BlockType.decision else "approval"
                        self.add(
                            path,
                            f"depends on {what} {dep!r} but is not one of its branch targets",
                            f"add {sid!r} to the branches of {dep!r}, or depend on a step after it",
                        )
                    continue  # the branch edge carries it
                if dep_kind is BlockType.terminate:
                    self.add(
                        path,
                        f"depends on terminate step {dep!r}, after which nothing runs",
                        "depend on the step before it",
                    )
                    continue
                own_loop = self.loop_of.get(sid)
                if dep == own_loop:
                    self.edges.append(Edge(dep, sid, "loop_body"))
                    continue
                if self.loop_of.get(dep) != own_loop:
                    if own_loop is not None and self.loop_of.get(dep) is None:
                        self.add(
                            path,
                            f"step {sid!r} in the body of loop {own_loop!r} depends on {dep!r}, "
                            "outside the loop",
                            f"depend on {own_loop!r} or on steps of its body "
                            "(outputs of earlier steps are still readable)",
                        )
                    else:
                        self.add(
                            path,
                            f"depends on {dep!r}, inside the body of loop "
                            f"{self.loop_of.get(dep)!r}",
                            f"depend on the loop step {self.loop_of.get(dep)!r} instead; "
                            "it finishes after the last iteration",
                        )
                    continue
                kind: EdgeKind = "loop_done" if dep_kind is BlockType.loop else "next"
                self.edges.append(Edge(dep, sid, kind))
            if len(self.problems) > reported:
                # A dependency that could not be wired is reported above; the step then counts
                # as reachable, so one mistake is not reported again as unreachable steps.
                self.dangling.add(sid)
            for label, target in self.branches[sid].items():
                path = f"{self.sp(sid)}.branches.{label}"
                if not self.known(target):
                    self.add(path, *_unknown_step(target, self.index))
                elif self.loop_of.get(target) != self.loop_of.get(sid):
                    self.add(
                        path,
                        f"branches from {_where(self.loop_of.get(sid))} to {target!r} "
                        f"{_where(self.loop_of.get(target))}",
                        "a branch stays in its loop body; leave a loop through the loop step",
                    )
                    self.dangling.add(target)
                else:
                    self.edges.append(Edge(sid, target, "branch", label))

    def _error_routes(self) -> None:
        for step in self._steps():
            sid = step.step_id
            if step.on_error is not None:
                if not self.known(step.on_error):
                    self.add(f"{self.sp(sid)}.on_error", *_unknown_step(step.on_error, self.index))
                else:
                    self.edges.append(Edge(sid, step.on_error, "on_error"))
            spec = step.approval
            if self.kinds[sid] is BlockType.approval and spec and spec.on_max_iterations:
                path = f"{self.sp(sid)}.approval.on_max_iterations"
                if not self.known(spec.on_max_iterations):
                    self.add(path, *_unknown_step(spec.on_max_iterations, self.index))
                else:
                    self.edges.append(Edge(sid, spec.on_max_iterations, "on_max_iterations"))
        failure = self.plan.on_failure
        if failure is None:
            return
        if not self.known(failure):
            self.add("on_failure", *_unknown_step(failure, self.index))
            return
        out, _ = self._adjacency()
        on_route = _reach([failure], out, _FORWARD | {"on_error"})
        for step in self._steps():
            if step.on_error is None and step.step_id not in on_route:
                self.edges.append(Edge(step.step_id, failure, "on_failure"))

    def _adjacency(self) -> tuple[dict[str, list[Edge]], dict[str, list[Edge]]]:
        out: dict[str, list[Edge]] = {sid: [] for sid in self.index}
        inc: dict[str, list[Edge]] = {sid: [] for sid in self.index}
        for edge in self.edges:
            out[edge.source].append(edge)
            inc[edge.target].append(edge)
        return out, inc

    def _entry(self, out: dict[str, list[Edge]]) -> list[str]:
        plan = self.plan
        if plan.entry_step_id is not None:
            if not self.known(plan.entry_step_id):
                self.add("entry_step_id", *_unknown_step(plan.entry_step_id, self.index))
                return []
            if plan.entry_step_id in self.loop_of:
                self.add(
                    "entry_step_id",
                    f"{plan.entry_step_id!r} is in the body of loop "
                    f"{self.loop_of[plan.entry_step_id]!r}",
                    "start with the loop step or a step outside loops",
                )
            return [plan.entry_step_id]
        routes = {e.target for e in self.edges if e.kind in ("on_error", "on_failure")}
        routes |= {e.target for e in self.edges if e.kind == "on_max_iterations"}
        entry: list[str] = []
        for step in self._steps():
            sid = step.step_id
            if step.depends_on or sid in self.loop_of or sid in routes:
                continue
            sources = {e.source for e in self.edges if e.kind == "branch" and e.target == sid}
            # A branch target that reaches back to its decision starts a review loop: it runs
            # first, and again when the decision sends the run back.
            if sources and not sources <= _reach([sid], out, _FORWARD):
                continue
            entry.append(sid)
        if not entry:
            self.add(
                "steps",
                "no step can run first: every step depends on another or is a branch target",
                "set entry_step_id, or give the first step no depends_on",
            )
        return entry

    def _reachability(self, entry: list[str], out: dict[str, list[Edge]]) -> None:
        reached = _reach([*entry, *self.dangling], out, None)
        for step in self._steps():
            if step.step_id not in reached and entry:
                self.add(
                    self.sp(step.step_id),
                    f"step {step.step_id!r} can never run: no path leads to it from "
                    f"{', '.join(repr(e) for e in entry)}",
                    "add it to the depends_on or branches of an earlier step, or remove it",
                )

    def _cycles(self, out: dict[str, list[Edge]]) -> None:
        for component in _strongly_connected(list(self.index), out, _CYCLE_EDGES):
            members = set(component)
            if len(component) == 1:
                only = component[0]
                if not any(e.target == only for e in out[only] if e.kind in _CYCLE_EDGES):
                    continue
            if any(self._bounded(sid) for sid in component):
                continue
            start = min(component, key=self.index.__getitem__)
            cycle = _cycle_path(start, members, out)
            self.add(
                self.sp(start),
                f"cycle outside a loop: {' → '.join(cycle)}",
                "bound it with max_iterations on one of its steps (or approval.max_iterations "
                "for a review loop), use a loop step, or break the cycle",
            )

    def _bounded(self, step_id: str) -> bool:
        step = self.plan.steps[self.index[step_id]]
        if step.max_iterations is not None:
            return True
        return (
            self.kinds[step_id] is BlockType.approval
            and step.approval is not None
            and step.approval.max_iterations is not None
        )

    def _joins(self, out: dict[str, list[Edge]], inc: dict[str, list[Edge]]) -> dict[str, Join]:
        """The join mode of every step, and explicit ``join: all`` that would never run."""
        regions = {
            (d, label): _reach([target], out, _FORWARD, avoid=d)
            for d in self.index
            for label, target in self.branches[d].items()
            if self.known(target)
        }
        inside: dict[str, dict[str, set[str]]] = {sid: {} for sid in self.index}
        for (d, label), region in regions.items():
            for sid in region:
                inside[sid].setdefault(d, set()).add(label)
        # A step lies on a branch of D when it is downstream of exactly one of D's labels.
        tags = {
            sid: {d: next(iter(labels)) for d, labels in per.items() if len(labels) == 1}
            for sid, per in inside.items()
        }
        joins: dict[str, Join] = {}
        for step in self._steps():
            sid = step.step_id
            incoming = [e for e in inc[sid] if e.kind in _JOIN_EDGES]
            reach_from_here = _reach([sid], out, _FORWARD)
            back = [e for e in incoming if e.source in reach_from_here]
            conflict = _exclusive_pair(incoming, tags)
            default: Join = "any" if back or conflict else "all"
            joins[sid] = step.join or default
            if step.join == "all" and len(incoming) > 1:
                if conflict is not None:
                    a, b, d = conflict
                    self.add(
                        f"{self.sp(sid)}.join",
                        f"join 'all' never runs: {a!r} and {b!r} are on different branches "
                        f"of {d!r}",
                        "use join: any (or leave join out)",
                    )
                elif back:
                    self.add(
                        f"{self.sp(sid)}.join",
                        f"join 'all' never runs the first time: {back[0].source!r} comes "
                        f"after {sid!r}",
                        "use join: any (or leave join out)",
                    )
        return joins

    def _loop_infos(self) -> dict[str, LoopInfo]:
        """Body entries and exits, with their ``loop_body`` and ``loop_back`` edges."""
        out, inc = self._adjacency()
        loops: dict[str, LoopInfo] = {}
        for step in self._steps():
            sid = step.step_id
            if self.kinds[sid] is not BlockType.loop or step.loop is None:
                continue
            spec = step.loop
            body = tuple(s for s in self.index if self.loop_of.get(s) == sid)
            members = set(body)
            inner = ("next", "branch", "loop_done")
            entries = tuple(
                s for s in body if not any(e.source in members for e in inc[s] if e.kind in inner)
            )
            exits = tuple(
                s for s in body if not any(e.target in members for e in out[s] if e.kind in inner)
            )
            done = tuple(e.target for e in out[sid] if e.kind == "loop_done")
            for s in entries:
                if not any(e.source == sid and e.kind == "loop_body" for e in inc[s]):
                    self.edges.append(Edge(sid, s, "loop_body"))
            for s in exits:
                self.edges.append(Edge(s, sid, "loop_back"))
            if body and not entries:
                self.add(
                    f"{self.sp(sid)}.loop.body",
                    "no body step can start an iteration: each depends on another body step",
                    "let the first body step depend only on the loop step",
                )
            loops[sid] = LoopInfo(
                step_id=sid,
                body=body,
                entries=entries,
                exits=exits,
                done=done,
                item_key=spec.item_key,
                index_key=spec.index_key,
                collect=(),  # filled in by _graph once outputs are known
                collect_key=spec.collect_key or f"{sid}_results",
            )
        return loops

    # -- per-kind checks ----------------------------------------------------------------------

    def _kind_checks(self) -> None:
        for step in self._steps():
            sid = step.step_id
            kind = self.kinds[sid]
            path = self.sp(sid)
            if kind is None:
                continue
            for name, kinds in _STEP_SETTINGS.items():
                if getattr(step, name) is not None and kind not in kinds:
                    self.problems.append(_ignored_setting(f"{path}.{name}", kind))
            block = self.blocks[sid]
            if kind is BlockType.decision:
                self._decision(step, block, path)
            elif kind is BlockType.approval:
                self._approval(step, path)
            elif kind is BlockType.wait:
                self._wait(step, path)
            elif kind is BlockType.loop and step.loop is None:
                self.add(
                    f"{path}.loop",
                    "a loop step needs loop settings",
                    "add loop: {over: <list key>, body: [<step ids>]}",
                )
            elif kind is BlockType.subflow:
                self._subflow(step, path)
            elif kind is BlockType.transform and not (
                step.transform or (block and block.transform)
            ):
                self.add(
                    f"{path}.transform",
                    "a transform step needs transform expressions",
                    "add transform: {output_key: expression}",
                )
            elif kind is BlockType.http and step.http is None and (block is None or not block.http):
                self.add(f"{path}.http", "an http step needs http settings", "add http: {url: ...}")
            if step.input_mappings and block is not None:
                for key in step.input_mappings:
                    if key not in block.input_keys:
                        self.add(
                            f"{path}.input_mappings.{key}",
                            f"{key!r} is not an input key of block {block.block_id!r}",
                            f"map one of {', '.join(block.input_keys) or '(none)'}",
                        )
            for field_path, text, how in self._step_templates(step, path):
                error = check(text) if how == "template" else check_expression(text)
                if error is not None:
                    self.problems.append(_syntax_problem(field_path, how, error))

    def _decision(self, step: PlanStep, block: BlockDefinition | None, path: str) -> None:
        labels = self.branches[step.step_id]
        if not labels:
            self.add(
                f"{path}.branches",
                "a decision without branches has nowhere to go",
                "add branches: {label: step_id, ...}",
            )
        if (
            step.branches
            and block is not None
            and block.branches
            and set(step.branches) != set(block.branches)
        ):
            self.add(
                f"{path}.branches",
                f"labels {sorted(step.branches)} differ from block {block.block_id!r}'s "
                f"labels {sorted(block.branches)}",
                "map exactly the block's labels to steps",
            )
        by_llm = block is not None and bool(block.prompt_template.strip())
        if not (by_llm or step.condition or step.cases):
            self.add(
                path,
                f"decision {step.step_id!r} has no way to choose a branch",
                "reference an LLM decision block (block_id), or add a condition or cases",
            )
        if step.condition and step.cases:
            self.add(
                f"{path}.condition",
                "both condition and cases are set",
                "keep one: a condition that renders to a label, or cases",
            )
        for k, case in enumerate(step.cases or []):
            if labels and case.branch not in labels:
                self.add(
                    f"{path}.cases[{k}].branch",
                    f"{case.branch!r} is not one of the branch labels {sorted(labels)}",
                    "use a label of branches, or add it to branches",
                )
        if step.default_branch is not None and labels and step.default_branch not in labels:
            self.add(
                f"{path}.default_branch",
                f"{step.default_branch!r} is not one of the branch labels {sorted(labels)}",
                "use a label of branches, or add it to branches",
            )

    def _approval(self, step: PlanStep, path: str) -> None:
        spec = step.approval or ApprovalSpec()
        labels = self.branches[step.step_id]
        for label in labels:
            if label not in APPROVAL_LABELS:
                self.add(
                    f"{path}.branches.{label}",
                    f"{label!r} is not an approval outcome",
                    f"use {', '.join(APPROVAL_LABELS)}",
                )
        if not spec.approvers and not self.plan.approvers:
            self.add(
                f"{path}.approval.approvers",
                f"approval step {step.step_id!r} has no approvers",
                "list approver emails in approval.approvers, or in the workflow's approvers",
            )
        for j, who in enumerate(spec.approvers):
            if "@" not in who:
                self.add(
                    f"{path}.approval.approvers[{j}]",
                    f"{who!r} is not an email address",
                    "approvers are email addresses",
                )
        timeout_target = labels.get("timed_out") or labels.get("rejected")
        if spec.on_timeout == "branch" and labels and timeout_target is None:
            self.add(
                f"{path}.approval.on_timeout",
                "on a timeout the run has nowhere to go: no 'timed_out' or 'rejected' branch",
                "add a timed_out (or rejected) branch, or set on_timeout to reject, approve "
                "or fail",
            )
        if spec.on_max_iterations is not None and spec.max_iterations is None:
            self.add(
                f"{path}.approval.on_max_iterations",
                "on_max_iterations has no effect without max_iterations",
                "set approval.max_iterations, or remove on_max_iterations",
            )
        if (
            spec.max_iterations is not None
            and spec.on_max_iterations is None
            and "approved" not in labels
        ):
            self.add(
                f"{path}.approval.max_iterations",
                "when the bound is reached the run has nowhere to go",
                "set approval.on_max_iterations, or add an approved branch",
            )

    def _wait(self, step: PlanStep, path: str) -> None:
        spec = step.wait
        if spec is None or (spec.seconds is None) == (spec.until is None):
            self.add(
                f"{path}.wait",
                "a wait step needs exactly one of seconds or until",
                "add wait: {seconds: 300} or wait: {until: '2030-01-01T09:00:00Z'}",
            )
            return
        if isinstance(spec.seconds, int) and spec.seconds < 0:
            self.add(f"{path}.wait.seconds", "seconds must not be negative", "use 0 or more")
        if spec.until is not None and not is_jinja(spec.until):
            try:
                datetime.fromisoformat(spec.until)
            except ValueError:
                self.add(
                    f"{path}.wait.until",
                    f"{spec.until!r} is not an ISO-8601 time",
                    "write e.g. 2030-01-01T09:00:00+00:00, or a template that renders one",
                )

    def _subflow(self, step: PlanStep, path: str) -> None:
        spec = step.subflow
        if spec is None:
            self.add(
                f"{path}.subflow",
                "a subflow step needs subflow settings",
                "add subflow: {workflow_id: <id>}",
            )
            return
        if spec.workflow_id == self.plan.plan_id:
            self.add(
                f"{path}.subflow.workflow_id",
                "a workflow cannot run itself as a subflow",
                "use a loop, or a review loop bounded by max_iterations",
            )
            return
        if self.lookup.get_workflow(spec.workflow_id, spec.version) is None:
            latest = self.lookup.get_workflow(spec.workflow_id)
            if spec.version is not None and latest is not None:
                self.add(
                    f"{path}.subflow.version",
                    f"workflow {spec.workflow_id!r} has no version {spec.version}",
                    f"the latest version is {latest.version}; pin an existing version",
                )
            else:
                self.add(
                    f"{path}.subflow.workflow_id",
                    f"unknown workflow {spec.workflow_id!r}",
                    "register the workflow first (langorch workflows put), or fix the id",
                )

    def _step_templates(
        self, step: PlanStep, path: str
    ) -> Iterator[tuple[str, str, Literal["template", "expression"]]]:
        """Every template and expression a step itself holds (not its block's)."""
        if step.condition is not None:
            yield f"{path}.condition", step.condition, "template"
        for k, case in enumerate(step.cases or []):
            yield f"{path}.cases[{k}].when", case.when, "expression"
        for key, expression in (step.transform or {}).items():
            yield f"{path}.transform.{key}", expression, "expression"
        if step.http is not None:
            yield from _http_templates(f"{path}.http", step.http)
        if self.kinds.get(step.step_id) is BlockType.read_file:
            read = step.read_file
            if read is None and self.blocks.get(step.step_id) is None:
                read = ReadFileSpec()  # an inline step's defaults read {{ bucket }}, {{ key }}
            if read is not None:
                yield from _read_file_templates(f"{path}.read_file", read)
        if step.approval is not None:
            yield f"{path}.approval.title", step.approval.title, "template"
            yield f"{path}.approval.message", step.approval.message, "template"
        if step.wait is not None:
            if isinstance(step.wait.seconds, str):
                yield f"{path}.wait.seconds", step.wait.seconds, "template"
            if step.wait.until is not None:
                yield f"{path}.wait.until", step.wait.until, "template"
        if step.terminate is not None:
            yield f"{path}.terminate.message", step.terminate.message, "template"

    def _plan_checks(self) -> None:
        plan = self.plan
        for i, trigger in enumerate(plan.triggers):
            path = f"triggers[{i}]"
            if trigger.type == "schedule":
                if trigger.schedule is None:
                    self.add(
                        f"{path}.schedule",
                        "a schedule trigger needs a schedule",
                        "add schedule: {cron_expression: '0 9 * * 1', timezone: 'UTC'}",
                    )
                else:
                    self.problems.extend(_schedule_problems(f"{path}.schedule", trigger.schedule))
            elif trigger.schedule is not None:
                self.problems.append(_ignored_trigger(f"{path}.schedule", trigger.type))
            if trigger.type == "s3":
                if not (trigger.bucket or trigger.prefix or trigger.suffix):
                    self.add(
                        path,
                        "an s3 trigger needs at least one of bucket, prefix or suffix",
                        "e.g. prefix: invoices/ and suffix: .pdf",
                    )
            else:
                for name in ("bucket", "prefix", "suffix"):
                    if getattr(trigger, name):
                        self.problems.append(_ignored_trigger(f"{path}.{name}", trigger.type))
        if plan.schedule is not None:
            self.problems.extend(_schedule_problems("schedule", plan.schedule))
        for j, who in enumerate(plan.approvers):
            if "@" not in who:
                self.add(
                    f"approvers[{j}]", f"{who!r} is not an email address", "use email addresses"
                )
        if plan.inputs_schema is not None:
            for j, key in enumerate(plan.inputs_schema.required):
                if key not in plan.inputs_schema.properties:
                    self.add(
                        f"inputs_schema.required[{j}]",
                        f"required input {key!r} is not among the properties",
                        f"declare {key!r} in inputs_schema.properties",
                    )

    # -- data flow ----------------------------------------------------------------------------

    def _step_outputs(self, sid: str, loops: Mapping[str, LoopInfo]) -> frozenset[str]:
        """The ``shared_context`` keys a step writes (as the engine's executors write them)."""
        step = self.plan.steps[self.index[sid]]
        block = self.blocks[sid]
        kind = self.kinds[sid]
        keys: set[str] = set(block.output_keys) if block else set()
        if kind is not None:
            keys |= engine_outputs(sid, kind)
        if kind is BlockType.http:
            http = step.http or (block.http if block else None)
            if http is not None and http.response_key:
                keys.add(http.response_key)
            elif not keys:
                keys.add(f"{sid}_response")
        elif kind is BlockType.transform:
            keys |= set(step.transform or (block.transform if block else None) or {})
        elif kind is BlockType.read_file:
            read = step.read_file or (block.read_file if block else None) or ReadFileSpec()
            if read.output_key:
                keys.add(read.output_key)
            elif not (block and block.output_keys):
                keys.add(f"{sid}_content")
        elif kind is BlockType.query_memory and not keys:
            keys.add("memory_results")
        elif kind is BlockType.approval:
            spec = step.approval or ApprovalSpec()
            keys |= {*spec.editable_keys, spec.feedback_key}
        elif kind is BlockType.loop and sid in loops:
            keys.add(loops[sid].collect_key)
        elif kind is BlockType.subflow and step.subflow is not None:
            keys |= set(step.subflow.outputs) or self._workflow_outputs(step.subflow.workflow_id)
        return frozenset(keys)

    def _workflow_outputs(self, workflow_id: str) -> set[str]:
        """What a subflow that copies everything back may write: its steps' outputs."""
        child = self.lookup.get_workflow(workflow_id)
        if child is None:
            return set()
        keys: set[str] = set()
        for step in child.steps:
            block = (
                self.lookup.get_block(step.block_id, step.block_version) if step.block_id else None
            )
            keys |= set(block.output_keys) if block else set()
            keys |= set(step.transform or {})
        return keys

    def _inputs(self, inc: dict[str, list[Edge]], loops: Mapping[str, LoopInfo]) -> None:
        """Every key a step reads must be provided before it (001 §4.1)."""
        plan = self.plan
        base: set[str] = set(BUILTIN_KEYS)
        if plan.inputs_schema is not None:
            base |= set(plan.inputs_schema.properties)
        for trigger in plan.all_triggers():
            base |= set(trigger.input)
            if trigger.type == "s3":
                base |= S3_INPUT_KEYS
        hint = (
            "declare it in inputs_schema.properties, produce it in an earlier step, "
            "or read it from another key with input_mappings"
            if plan.inputs_schema is not None
            else "declare it in inputs_schema (the workflow has none), or produce it in an "
            "earlier step"
        )
        for step in self._steps():
            sid = step.step_id
            # Everything that can run before the step, through any edge (a review loop's
            # feedback reaches the steps it sends the run back to); the step itself only when
            # it lies on a cycle.
            ancestors = _reach([e.source for e in inc[sid]], inc, None, backwards=True)
            available = set(base)
            for ancestor in ancestors:
                available |= self.outputs[ancestor]
            loop = self.loop_of.get(sid)
            while loop is not None:
                if loop in loops:
                    available |= {loops[loop].item_key, loops[loop].index_key}
                loop = self.loop_of.get(loop)
            for path, key, what in self._reads(step):
                if key not in available:
                    self.add(
                        path,
                        f"{what} {key!r}, which no input or earlier step provides",
                        hint,
                    )

    def _reads(self, step: PlanStep) -> Iterator[tuple[str, str, str]]:
        """(path, key, description) for every ``shared_context`` key a step reads."""
        sid = step.step_id
        path = self.sp(sid)
        block = self.blocks[sid]
        kind = self.kinds[sid]
        mappings = step.input_mappings or {}
        if block is not None:
            for key in block.input_keys:
                source = mappings.get(key, key)
                if key in mappings:
                    yield f"{path}.input_mappings.{key}", _root(source), f"input {key!r} reads"
                else:
                    yield f"{path}.block_id", key, f"block {block.block_id!r} needs input"
            if kind is BlockType.save_memory and block.memory is not None and not step.memory:
                for key in block.memory.keys:
                    yield f"{path}.block_id", key, f"block {block.block_id!r} saves"
        if kind is BlockType.save_memory and step.memory is not None:
            for j, key in enumerate(step.memory.keys):
                yield f"{path}.memory.keys[{j}]", _root(key), "saves"
        for field_path, text, how in self._step_templates(step, path):
            try:
                names = _names(text, how)
            except TemplateError:
                continue  # reported as a syntax problem
            for name in sorted(names):
                yield field_path, name, "reads"
        if step.approval is not None and kind is BlockType.approval:
            for j, key in enumerate(step.approval.show_keys):
                yield f"{path}.approval.show_keys[{j}]", _root(key), "shows"
        if step.loop is not None and kind is BlockType.loop:
            for name in sorted(_key_or_template(step.loop.over)):
                yield f"{path}.loop.over", name, "iterates over"
        if step.subflow is not None and kind is BlockType.subflow:
            for child_key, source in step.subflow.inputs.items():
                for name in sorted(_key_or_template(source)):
                    yield f"{path}.subflow.inputs.{child_key}", name, "passes"
        if step.terminate is not None and kind is BlockType.terminate:
            for out_key, source in step.terminate.outputs.items():
                for name in sorted(_key_or_template(source)):
                    yield f"{path}.terminate.outputs.{out_key}", name, "outputs"

    def _registries(self) -> None:
        """Tools and providers: known only when the caller passes the registries."""
        tools, providers = self.tools, self.providers
        for step in self._steps():
            path = self.sp(step.step_id)
            block = self.blocks[step.step_id]
            if block is not None and tools is not None:
                for tool in block.tools_required:
                    if tool not in tools:
                        problem = _unknown_tool(f"{path}.block_id", tool, tools)
                        self.add(
                            problem.path,
                            f"block {block.block_id!r} needs {problem.message}",
                            problem.hint,
                        )
            if providers is None:
                continue
            if block is not None and block.llm_provider and block.llm_provider not in providers:
                problem = _unknown_provider(f"{path}.block_id", block.llm_provider, providers)
                self.add(
                    problem.path, f"block {block.block_id!r} uses {problem.message}", problem.hint
                )
            if step.llm_provider and step.llm_provider not in providers:
                self.problems.append(
                    _unknown_provider(f"{path}.llm_provider", step.llm_provider, providers)
                )
        plan_provider = self.plan.llm_provider
        if providers is not None and plan_provider and plan_provider not in providers:
            self.problems.append(_unknown_provider("llm_provider", plan_provider, providers))

    # -- result -------------------------------------------------------------------------------

    def _graph(
        self,
        entry: list[str],
        joins: dict[str, Join],
        loops: dict[str, LoopInfo],
        out: dict[str, list[Edge]],
        inc: dict[str, list[Edge]],
    ) -> StepGraph:
        resolved_loops: dict[str, LoopInfo] = {}
        for sid, info in loops.items():
            spec = self.plan.steps[self.index[sid]].loop
            collect = tuple(spec.collect) if spec and spec.collect else ()
            if not collect:
                collect = tuple(sorted(set().union(*(self.outputs[s] for s in info.body))))
            resolved_loops[sid] = replace(info, collect=collect)
        failure_edges = {e.source: e.target for e in self.edges if e.kind == "on_failure"}
        nodes: dict[str, StepNode] = {}
        for step in self._steps():
            sid = step.step_id
            nodes[sid] = StepNode(
                step_id=sid,
                index=self.index[sid],
                step=step,
                kind=self.kinds[sid],
                block=self.blocks[sid],
                branches=MappingProxyType(dict(self.branches[sid])),
                join=joins.get(sid, "all"),
                loop=self.loop_of.get(sid),
                outputs=self.outputs[sid],
                error_route=step.on_error if self.known(step.on_error) else failure_edges.get(sid),
            )
        terminal_kinds: tuple[EdgeKind, ...] = ("next", "branch", "loop_done", "on_max_iterations")
        terminals = tuple(
            sid
            for sid in nodes
            if sid not in self.loop_of and not any(e.kind in terminal_kinds for e in out[sid])
        )
        return StepGraph(
            plan_id=self.plan.plan_id,
            steps=MappingProxyType(nodes),
            edges=tuple(self.edges),
            entry=tuple(entry),
            loops=MappingProxyType(resolved_loops),
            on_failure=self.plan.on_failure if self.known(self.plan.on_failure) else None,
            terminals=terminals,
            _out=MappingProxyType({k: tuple(v) for k, v in out.items()}),
            _in=MappingProxyType({k: tuple(v) for k, v in inc.items()}),
        )

    def _steps(self) -> Iterator[PlanStep]:
        """The steps with a unique id (a duplicate is reported once and then left out)."""
        for i, step in enumerate(self.plan.steps):
            if self.index.get(step.step_id) == i:
                yield step


# --------------------------------------------------------------------------------------------
# Helpers
# --------------------------------------------------------------------------------------------


def _reach(
    start: Iterable[str],
    adjacency: Mapping[str, list[Edge]],
    kinds: frozenset[EdgeKind] | None,
    *,
    avoid: str | None = None,
    backwards: bool = False,
) -> set[str]:
    """Steps reachable from ``start`` (included) along edges of ``kinds`` (``None``: all)."""
    seen: set[str] = set()
    queue = deque(s for s in start if s != avoid)
    while queue:
        sid = queue.popleft()
        if sid in seen:
            continue
        seen.add(sid)
        for edge in adjacency.get(sid, []):
            if kinds is not None and edge.kind not in kinds:
                continue
            nxt = edge.source if backwards else edge.target
            if nxt != avoid and nxt not in seen:
                queue.append(nxt)
    return seen


def _strongly_connected(
    nodes: list[str], out: Mapping[str, list[Edge]], kinds: frozenset[EdgeKind]
) -> list[list[str]]:
    """Tarjan's strongly connected components, iterative (plans may have hundreds of steps)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    components: list[list[str]] = []
    counter = 0
    for root in nodes:
        if root in index:
            continue
        work: list[tuple[str, Iterator[Edge]]] = [(root, iter(out.get(root, [])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, edges = work[-1]
            advanced = False
            for edge in edges:
                if edge.kind not in kinds:
                    continue
                target = edge.target
                if target not in index:
                    index[target] = low[target] = counter
                    counter += 1
                    stack.append(target)
                    on_stack.add(target)
                    work.append((target, iter(out.get(target, []))))
                    advanced = True
                    break
                if target in on_stack:
                    low[node] = min(low[node], index[target])
            if advanced:
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                component: list[str] = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                components.append(component)
    return components


def _cycle_path(start: str, members: set[str], out: Mapping[str, list[Edge]]) -> list[str]:
    """One concrete cycle through ``start`` inside a strongly connected component."""
    parents: dict[str, str] = {}
    queue = deque([start])
    while queue:
        node = queue.popleft()
        for edge in out.get(node, []):
            if edge.kind not in _CYCLE_EDGES or edge.target not in members:
                continue
            if edge.target == start:
                path = [node]
                while path[-1] != start:
                    path.append(parents[path[-1]])
                return [*reversed(path), start]
            if edge.target not in parents:
                parents[edge.target] = node
                queue.append(edge.target)
    return [start, start]


def _exclusive_pair(
    incoming: list[Edge], tags: Mapping[str, Mapping[str, str]]
) -> tuple[str, str, str] | None:
    """Two incoming edges on different branches of one decision: ``(a, b, decision)``."""

    def tag(edge: Edge) -> dict[str, str]:
        own = dict(tags.get(edge.source, {}))
        if edge.kind == "branch" and edge.label is not None:
            own[edge.source] = edge.label
        return own

    tagged = [(edge.source, tag(edge)) for edge in incoming]
    for i, (a, tag_a) in enumerate(tagged):
        for b, tag_b in tagged[i + 1 :]:
            for decision, label in tag_a.items():
                if decision in tag_b and tag_b[decision] != label:
                    return a, b, decision
    return None


def _names(text: str, how: Literal["template", "expression"]) -> set[str]:
    """Top-level names a template or expression reads, without Jinja's own names."""
    if how == "expression":
        text = "{{ " + strip_braces(text) + " }}"
    return placeholders(text) - _JINJA_NAMES


def _key_or_template(value: str) -> set[str]:
    """Names read by a field that holds a ``shared_context`` key or a template."""
    if _KEY.match(value):
        return {_root(value)}
    try:
        if is_jinja(value):
            return _names(value, "template")
        return _names(value, "expression")
    except TemplateError:
        # Not an expression either: literal text, which reads nothing.
        return set()


def _root(key: str) -> str:
    return key.split(".", 1)[0]


def _http_templates(
    path: str, http: HttpSpec
) -> Iterator[tuple[str, str, Literal["template", "expression"]]]:
    yield f"{path}.url", http.url, "template"
    for name, value in http.headers.items():
        yield f"{path}.headers.{name}", value, "template"
    yield from _json_strings(f"{path}.body", http.body)


def _read_file_templates(
    path: str, spec: ReadFileSpec
) -> Iterator[tuple[str, str, Literal["template", "expression"]]]:
    yield f"{path}.bucket", spec.bucket, "template"
    yield f"{path}.key", spec.key, "template"


def _json_strings(
    path: str, value: Any
) -> Iterator[tuple[str, str, Literal["template", "expression"]]]:
    if isinstance(value, str):
        yield path, value, "template"
    elif isinstance(value, dict):
        for key, item in value.items():
            yield from _json_strings(f"{path}.{key}", item)
    elif isinstance(value, list):
        for i, item in enumerate(value):
            yield from _json_strings(f"{path}[{i}]", item)


def _schedule_problems(path: str, schedule: ScheduleSpec) -> list[Problem]:
    problems: list[Problem] = []
    fields = schedule.cron_expression.split()
    if len(fields) != 5:
        problems.append(
            Problem(
                f"{path}.cron_expression",
                f"{schedule.cron_expression!r} has {len(fields)} fields, not 5",
                "write minute hour day-of-month month day-of-week, e.g. '0 12 * * 2'",
            )
        )
    elif not _cron_is_valid(schedule.cron_expression):
        problems.append(
            Problem(
                f"{path}.cron_expression",
                f"{schedule.cron_expression!r} is not a valid cron expression",
                "write minute hour day-of-month month day-of-week, e.g. '0 12 * * 2'",
            )
        )
    try:
        ZoneInfo(schedule.timezone)
    except (ZoneInfoNotFoundError, ValueError):
        problems.append(
            Problem(
                f"{path}.timezone",
                f"unknown timezone {schedule.timezone!r}",
                "use an IANA name such as 'UTC' or 'Europe/Paris'",
            )
        )
    return problems


def _syntax_problem(path: str, how: str, error: str) -> Problem:
    return Problem(
        path,
        f"malformed {how}: {error}",
        "fix the syntax; templates use {{ name }} (or seed 000's {name}), "
        "expressions look like x > 3",
    )


def _unknown_step(step_id: str, known: Mapping[str, int]) -> tuple[str, str]:
    close = _closest(step_id, known)
    hint = f"did you mean {close!r}?" if close else "use the step_id of a step of this workflow"
    return f"unknown step {step_id!r}", hint


def _closest(name: str, candidates: Iterable[str]) -> str | None:
    matches = difflib.get_close_matches(name, list(candidates), n=1)
    return matches[0] if matches else None


def _unknown_tool(path: str, tool: str, tools: frozenset[str]) -> Problem:
    return Problem(
        path,
        f"unknown tool {tool!r}",
        f"registered tools are {', '.join(sorted(tools)) or '(none)'}",
    )


def _unknown_provider(path: str, provider: str, providers: frozenset[str]) -> Problem:
    return Problem(
        path,
        f"unknown LLM provider {provider!r}",
        f"available providers are {', '.join(sorted(providers)) or '(none)'}",
    )


def _ignored_setting(path: str, kind: BlockType) -> Problem:
    name = path.rsplit(".", 1)[-1]
    return Problem(
        path,
        f"{name} is set but this is a {kind.value} step, which ignores it",
        "remove it, or change the kind",
    )


def _ignored_trigger(path: str, trigger_type: str) -> Problem:
    name = path.rsplit(".", 1)[-1]
    return Problem(
        path, f"a {trigger_type} trigger ignores {name}", "remove it, or change the trigger type"
    )


def _where(loop: str | None) -> str:
    return f"inside loop {loop!r}" if loop else "outside any loop"
