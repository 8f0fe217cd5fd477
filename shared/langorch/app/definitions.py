"""Registering blocks and workflows: validate everything, pin versions, then store.

Use-cases are functions of (command, dependencies): the store is passed in, so tests use an
in-memory fake or moto and the CLI uses DynamoDB.

The rules (RELIABILITY.md "Definitions and CLI input"):

* A definition is validated before it is stored; every problem is reported at once, and a
  definition with any error is never stored. Warnings (an input resolved at run time from the
  user's preferences, a tool no registry binds yet, a review loop with no route for its last
  rejection) are returned beside the stored definitions; ``strict`` makes them errors.
* A batch of files is all-or-nothing for validation: every file is loaded and checked before
  the first write, blocks are stored before the workflows that use them, and a workflow may
  use a block (or a subflow) defined in the same batch.
* A stored workflow names exact versions: a step's ``block_version`` and a subflow's
  ``version`` left empty are filled with the latest stored version at registration time, so
  a run never changes behaviour because a block changed later.
* Built-in blocks are stored on first use: a workflow that uses one registers it too.
* A stored workflow version becomes the *active* one (what runs start) unless it is stored as a
  draft (``activate=False``, ``workflows put --draft``): then ``workflows promote`` activates
  it (:mod:`langorch.app.promotions`). A draft's subflows from the same batch are pinned to
  the drafts stored with it.
* A CKP procedure (seed 001) is a workflow too: compiled when its file is loaded, bound to the
  deployment's agents and tools here (the nodes an agent with a resource key performs hold its
  lease), and its problems are reported at their JSON paths in the procedure.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Literal, Protocol, cast, runtime_checkable

from langorch.domain.builtins import builtin_blocks
from langorch.domain.definitions import BlockDefinition, TaskPlan
from langorch.domain.errors import DefinitionError, Problem
from langorch.domain.loading import load_file
from langorch.domain.lookup import InMemoryLookup
from langorch.domain.validation import (
    DefinitionLookup,
    Validation,
    check_block,
    check_workflow,
    workflow_advice,
)
from langorch.llm.names import KNOWN_PROVIDERS, KNOWN_TOOLS

if TYPE_CHECKING:
    from langorch.domain.agents import AgentRegistration

Kind = Literal["block", "workflow"]


class DefinitionsStore(Protocol):
    """What registration needs from a store (``DefinitionsRepository`` is one)."""

    def get_block(self, block_id: str, version: int | None = None) -> BlockDefinition | None:
        """The block at ``version`` (``None``: latest), or ``None``."""
        ...

    def get_workflow(self, workflow_id: str, version: int | None = None) -> TaskPlan | None:
        """The workflow at ``version`` (``None``: the active one), or ``None``."""
        ...

    def put_block(self, block: BlockDefinition) -> tuple[BlockDefinition, bool]:
        """Store a block; returns the stored version and whether it is new."""
        ...

    def put_workflow(self, plan: TaskPlan, *, activate: bool = True) -> tuple[TaskPlan, bool]:
        """Store a workflow (a draft unless ``activate``); returns the stored version and
        whether it is new."""
        ...


@dataclass(frozen=True)
class RegisterResult:
    """What registering one definition did.

    Attributes:
        kind: ``"block"`` or ``"workflow"``.
        id: the block id or plan id.
        version: the stored version (new, or the existing one for identical content).
        created: True when a new version was written, False for identical content.
        content_hash: the stored content's hash.
        definition: the definition as stored (with its version and pinned references).
        source: the file it came from, when it came from one.
    """

    kind: Kind
    id: str
    version: int
    created: bool
    content_hash: str
    definition: BlockDefinition | TaskPlan
    source: str | None = None


@dataclass
class ValidatedBatch:
    """Definitions from a batch of files that passed validation, in storing order.

    Attributes:
        blocks: blocks from the files, plus built-ins the workflows use that are not stored.
        workflows: workflows, each after the workflows it uses as subflows.
        sources: ``(kind, id)`` -> the file the definition came from.
        warnings: what is accepted but worth a look, each path prefixed with its file and
            definition (empty with ``strict``: warnings are errors then).
    """

    blocks: list[BlockDefinition] = field(default_factory=list)
    workflows: list[TaskPlan] = field(default_factory=list)
    sources: dict[tuple[Kind, str], str] = field(default_factory=dict)
    warnings: list[Problem] = field(default_factory=list)


# --------------------------------------------------------------------------------------------
# Use-cases
# --------------------------------------------------------------------------------------------


def register_block(
    repo: DefinitionsStore, block: BlockDefinition, *, tools: frozenset[str] = KNOWN_TOOLS
) -> RegisterResult:
    """Validate and store one block (its warnings do not stop it).

    Args:
        repo: the definitions store.
        block: the block; its ``version`` is assigned by the store.
        tools: the tools bound in this deployment (default: the built-ins).

    Returns:
        What was stored (or found identical).

    Raises:
        DefinitionError: the block has errors; nothing was stored.
    """
    problems = check_block(block, tools=tools, providers=KNOWN_PROVIDERS).errors
    if problems:
        raise DefinitionError(f"block {block.block_id}", problems)
    return _store_block(repo, block, source=None)


def register_workflow(
    repo: DefinitionsStore, plan: TaskPlan, *, tools: frozenset[str] = KNOWN_TOOLS
) -> RegisterResult:
    """Validate one workflow against the stored blocks, pin its versions and store it (its
    warnings do not stop it).

    Args:
        repo: the definitions store; it is also the lookup for blocks and subflows.
        plan: the workflow; its ``version`` is assigned by the store.
        tools: the tools bound in this deployment (default: the built-ins).

    Returns:
        What was stored (or found identical).

    Raises:
        DefinitionError: the workflow has errors; nothing was stored.
    """
    builtins = _builtins_to_store([plan], set(), repo)
    lookup = _PendingLookup(repo, builtins, [])
    problems = check_workflow(plan, lookup, tools=tools, providers=KNOWN_PROVIDERS).errors
    if problems:
        raise DefinitionError(f"workflow {plan.plan_id}", problems)
    for block in builtins:
        _store_block(repo, block, source=None)
    return _store_workflow(repo, plan, source=None)


def validate_files(
    paths: Sequence[str | Path],
    lookup: DefinitionLookup | None = None,
    *,
    tools: frozenset[str] = KNOWN_TOOLS,
    strict: bool = False,
    agents: Sequence[AgentRegistration] = (),
) -> ValidatedBatch:
    """Load and validate a batch of files without storing anything.

    References resolve, in order, to the definitions in the batch, then ``lookup`` (the
    stored definitions, when a store is reachable), then the built-in blocks.

    Args:
        paths: definition files (YAML or JSON).
        lookup: stored definitions; ``None`` validates offline.
        tools: the tools bound in this deployment (default: the built-ins of
            :mod:`langorch.llm.builtin_tools`); a block needing another is a warning.
        strict: count warnings as errors.
        agents: the agents registered in this deployment (CKP procedures bind to them; an
            action nothing performs is a warning).

    Returns:
        The batch, ready to store, with its warnings.

    Raises:
        DefinitionError: any file has any error (with ``strict``: any warning);
            ``problems`` lists all of them, each path prefixed with its file and definition.
    """
    problems: list[Problem] = []
    found: list[Problem] = []
    batch = ValidatedBatch()
    seen: dict[tuple[Kind, str], str] = {}
    for path in paths:
        source = str(path)
        try:
            loaded = load_file(path)
        except DefinitionError as exc:
            problems.extend(_located(source, exc.problems, separator=": "))
            continue
        for block in loaded.blocks:
            if _is_duplicate(seen, "block", block.block_id, source, problems):
                continue
            batch.blocks.append(block)
        for plan in loaded.workflows:
            if _is_duplicate(seen, "workflow", plan.plan_id, source, problems):
                continue
            if plan.ckp is not None:
                plan, unbound = _bound(plan, agents, tools)
                found.extend(
                    _located(f"{source}: procedure {plan.plan_id}", unbound, separator=": ")
                )
            batch.workflows.append(plan)
        found.extend(_located(source, loaded.warnings, separator=": "))
    # CKP procedures' own findings (unbound actions, fields a node type ignores) are warnings
    # like the others: errors with --strict.
    (problems if strict else batch.warnings).extend(found)
    batch.sources = seen

    in_batch = {b.block_id for b in batch.blocks}
    batch.blocks.extend(_builtins_to_store(batch.workflows, in_batch, lookup))
    pending = _PendingLookup(lookup, batch.blocks, batch.workflows)

    for where, validation in _checked(batch, pending, tools):
        validation = validation.strict() if strict else validation
        problems.extend(_located(where, validation.errors, separator=": "))
        batch.warnings.extend(_located(where, validation.warnings, separator=": "))

    if problems:
        raise DefinitionError(_subject(paths), problems)
    batch.workflows = _subflows_first(batch.workflows)
    return batch


def register_files(
    repo: DefinitionsStore,
    paths: Sequence[str | Path],
    *,
    tools: frozenset[str] = KNOWN_TOOLS,
    strict: bool = False,
    agents: Sequence[AgentRegistration] = (),
    activate: bool = True,
) -> list[RegisterResult]:
    """Validate every file, then store blocks, then workflows (with pinned versions).

    Args:
        repo: the definitions store; also the lookup for references outside the batch.
        paths: definition files (YAML or JSON).
        tools: the tools bound in this deployment (default: the built-ins).
        strict: count warnings as errors (:func:`validate_files` returns the warnings).
        agents: the registered agents CKP procedures bind to.
        activate: make the new workflow versions active (``False``: drafts, to promote).

    Returns:
        One result per stored definition: blocks first, then workflows.

    Raises:
        DefinitionError: any file has any error (with ``strict``: any warning); nothing was
            stored.
    """
    batch = validate_files(paths, repo, tools=tools, strict=strict, agents=agents)
    results = [
        _store_block(repo, block, source=batch.sources.get(("block", block.block_id)))
        for block in batch.blocks
    ]
    # Subflows come first, so a subflow from this batch is stored (a draft too) when its
    # parent is pinned to it.
    stored = InMemoryLookup()
    for plan in batch.workflows:
        result = _store_workflow(
            repo,
            plan,
            source=batch.sources.get(("workflow", plan.plan_id)),
            activate=activate,
            batch=stored,
        )
        stored.add_workflow(cast(TaskPlan, result.definition))
        results.append(result)
    return results


def seed_builtins(repo: DefinitionsStore) -> list[RegisterResult]:
    """Store the built-in blocks (a no-op for those already stored with the same content).

    Args:
        repo: the definitions store.

    Returns:
        One result per built-in block.

    Raises:
        DefinitionError: a built-in block is invalid (a bug in langorch).
    """
    return [register_block(repo, block) for block in builtin_blocks()]


def pin_versions(plan: TaskPlan, lookup: DefinitionLookup) -> TaskPlan:
    """The plan with every unpinned block and subflow reference set to the latest version.

    Args:
        plan: the workflow.
        lookup: where the latest versions are read.

    Returns:
        A copy of ``plan``; references that already name a version are kept.

    Raises:
        DefinitionError: a referenced block or workflow does not exist.
    """
    problems: list[Problem] = []
    steps = []
    for index, step in enumerate(plan.steps):
        changes: dict[str, object] = {}
        if step.block_id is not None and step.block_version is None:
            block = lookup.get_block(step.block_id)
            if block is None:
                problems.append(_unknown(f"steps[{index}].block_id", "block", step.block_id))
            else:
                changes["block_version"] = block.version
        if step.subflow is not None and step.subflow.version is None:
            child = lookup.get_workflow(step.subflow.workflow_id)
            if child is None:
                problems.append(
                    _unknown(
                        f"steps[{index}].subflow.workflow_id", "workflow", step.subflow.workflow_id
                    )
                )
            else:
                changes["subflow"] = step.subflow.model_copy(update={"version": child.version})
        steps.append(step.model_copy(update=changes) if changes else step)
    if problems:
        raise DefinitionError(f"workflow {plan.plan_id}", problems)
    return plan.model_copy(update={"steps": steps})


# --------------------------------------------------------------------------------------------
# Helpers
# --------------------------------------------------------------------------------------------


def _checked(
    batch: ValidatedBatch, lookup: DefinitionLookup, tools: frozenset[str]
) -> Iterator[tuple[str, Validation]]:
    """``(where, findings)`` of each definition of the batch; a workflow's warnings include
    :func:`~langorch.domain.validation.workflow_advice` (valid, but probably not meant)."""
    for block in batch.blocks:
        where = batch.sources.get(("block", block.block_id), "<built-in>")
        yield (
            f"{where}: block {block.block_id}",
            check_block(block, tools=tools, providers=KNOWN_PROVIDERS),
        )
    for plan in batch.workflows:
        found = check_workflow(plan, lookup, tools=tools, providers=KNOWN_PROVIDERS)
        what = "procedure" if plan.ckp is not None else "workflow"
        yield (
            f"{batch.sources[('workflow', plan.plan_id)]}: {what} {plan.plan_id}",
            _in_procedure(
                plan, Validation(found.errors, [*found.warnings, *workflow_advice(plan)])
            ),
        )


def _bound(
    plan: TaskPlan, agents: Sequence[AgentRegistration], tools: frozenset[str]
) -> tuple[TaskPlan, list[Problem]]:
    """A CKP procedure bound to the deployment's agents and tools, and its unbound actions.

    The CKP modules are imported here, for a procedure: validating a workflow or a block never
    loads them (issue 26).
    """
    from langorch.domain.ckp.binding import Catalog, bind_procedure

    return bind_procedure(plan, Catalog(agents={a.name: a for a in agents}, tools=tools))


def _in_procedure(plan: TaskPlan, validation: Validation) -> Validation:
    """A CKP procedure's findings at the paths the author wrote (its nodes, not its steps)."""
    if plan.ckp is None:
        return validation
    from langorch.domain.ckp.compiler import ckp_path

    def located(problems: list[Problem]) -> list[Problem]:
        return [Problem(ckp_path(plan, p.path), p.message, p.hint) for p in problems]

    return Validation(located(validation.errors), located(validation.warnings))


def _store_block(
    repo: DefinitionsStore, block: BlockDefinition, *, source: str | None
) -> RegisterResult:
    stored, created = repo.put_block(block)
    return RegisterResult(
        kind="block",
        id=stored.block_id,
        version=stored.version,
        created=created,
        content_hash=stored.content_hash(),
        definition=stored,
        source=source,
    )


def _store_workflow(
    repo: DefinitionsStore,
    plan: TaskPlan,
    *,
    source: str | None,
    activate: bool = True,
    batch: InMemoryLookup | None = None,
) -> RegisterResult:
    lookup = repo if batch is None else _BatchFirst(batch, repo)
    stored, created = repo.put_workflow(pin_versions(plan, lookup), activate=activate)
    return RegisterResult(
        kind="workflow",
        id=stored.plan_id,
        version=stored.version,
        created=created,
        content_hash=stored.content_hash(),
        definition=stored,
        source=source,
    )


@runtime_checkable
class _KnowsLatest(Protocol):
    """A store that tells its newest version apart from the active one (drafts)."""

    def latest_version(self, kind: Kind, definition_id: str) -> int | None: ...

    def get_workflow(self, workflow_id: str, version: int | None = None) -> TaskPlan | None: ...


class _BatchFirst:
    """The workflows a batch stored, then the store: a subflow is pinned to the version its
    batch stored, even a draft."""

    def __init__(self, batch: InMemoryLookup, base: DefinitionLookup) -> None:
        self._batch = batch
        self._base = base

    def get_block(self, block_id: str, version: int | None = None) -> BlockDefinition | None:
        return self._base.get_block(block_id, version)

    def get_workflow(self, workflow_id: str, version: int | None = None) -> TaskPlan | None:
        found = self._batch.get_workflow(workflow_id, version)
        return found if found is not None else self._base.get_workflow(workflow_id, version)


class _PendingLookup:
    """The batch overlaid on the store: batch definitions win, with the version each would get.

    Predicting the version lets a step that pins ``block_version`` to the version this very
    batch will create validate, and gives unpinned references the number they will be pinned
    to.
    """

    def __init__(
        self,
        base: DefinitionLookup | None,
        blocks: Iterable[BlockDefinition],
        workflows: Iterable[TaskPlan],
    ) -> None:
        self._base = base
        self._blocks = {b.block_id: self._predict_block(b) for b in blocks}
        self._workflows = {w.plan_id: self._predict_workflow(w) for w in workflows}

    def get_block(self, block_id: str, version: int | None = None) -> BlockDefinition | None:
        pending = self._blocks.get(block_id)
        if pending is not None and version in (None, pending.version):
            return pending
        return None if self._base is None else self._base.get_block(block_id, version)

    def get_workflow(self, workflow_id: str, version: int | None = None) -> TaskPlan | None:
        pending = self._workflows.get(workflow_id)
        if pending is not None and version in (None, pending.version):
            return pending
        return None if self._base is None else self._base.get_workflow(workflow_id, version)

    def _predict_block(self, block: BlockDefinition) -> BlockDefinition:
        latest = None if self._base is None else self._base.get_block(block.block_id)
        return block.model_copy(update={"version": _next_version(latest, block)})

    def _predict_workflow(self, plan: TaskPlan) -> TaskPlan:
        latest = None if self._base is None else self._base.get_workflow(plan.plan_id)
        if isinstance(self._base, _KnowsLatest):
            # The active version may be older than a draft: the next version follows the latest.
            newest = self._base.latest_version("workflow", plan.plan_id)
            if newest is not None:
                latest = self._base.get_workflow(plan.plan_id, newest)
        return plan.model_copy(update={"version": _next_version(latest, plan)})


def _next_version(
    latest: BlockDefinition | TaskPlan | None, new: BlockDefinition | TaskPlan
) -> int:
    if latest is None:
        return 1
    return latest.version if latest.content_hash() == new.content_hash() else latest.version + 1


def _builtins_to_store(
    plans: Iterable[TaskPlan], in_batch: set[str], lookup: DefinitionLookup | None
) -> list[BlockDefinition]:
    """Built-in blocks the workflows use that are neither in the batch nor stored."""
    used = {s.block_id for plan in plans for s in plan.steps if s.block_id is not None}
    wanted = used - in_batch
    if not wanted:
        return []
    return [
        block
        for block in builtin_blocks()
        if block.block_id in wanted and (lookup is None or lookup.get_block(block.block_id) is None)
    ]


def _subflows_first(plans: list[TaskPlan]) -> list[TaskPlan]:
    """Order workflows so each comes after the batch workflows it uses as subflows."""
    by_id = {p.plan_id: p for p in plans}
    ordered: list[TaskPlan] = []
    visiting: set[str] = set()
    done: set[str] = set()

    def visit(plan: TaskPlan) -> None:
        if plan.plan_id in done or plan.plan_id in visiting:
            # A subflow cycle is the validator's to report; here it only must not recurse forever.
            return
        visiting.add(plan.plan_id)
        for step in plan.steps:
            child = by_id.get(step.subflow.workflow_id) if step.subflow is not None else None
            if child is not None:
                visit(child)
        visiting.discard(plan.plan_id)
        done.add(plan.plan_id)
        ordered.append(plan)

    for plan in plans:
        visit(plan)
    return ordered


def _is_duplicate(
    seen: dict[tuple[Kind, str], str],
    kind: Kind,
    definition_id: str,
    source: str,
    problems: list[Problem],
) -> bool:
    first = seen.get((kind, definition_id))
    if first is None:
        seen[(kind, definition_id)] = source
        return False
    problems.append(
        Problem(
            path=f"{source}: {kind} {definition_id}",
            message=f"{kind} {definition_id!r} is defined more than once (first in {first})",
            hint=f"keep one definition of {definition_id!r} per batch",
        )
    )
    return True


def _located(where: str, problems: Iterable[Problem], *, separator: str) -> list[Problem]:
    """Problems with their path prefixed by the file and definition they belong to."""
    located = []
    for problem in problems:
        path = f"{where}{separator}{problem.path}" if problem.path else where
        located.append(Problem(path=path, message=problem.message, hint=problem.hint))
    return located


def _unknown(path: str, kind: Kind, definition_id: str) -> Problem:
    return Problem(
        path=path,
        message=f"unknown {kind} {definition_id!r}",
        hint=f"register the {kind} first, or put it in the same batch of files",
    )


def _subject(paths: Sequence[str | Path]) -> str:
    if len(paths) == 1:
        return str(paths[0])
    return f"{len(paths)} files"
