"""The first half of a plan's topology: each step's kind and block, and every edge.

:class:`Wiring` resolves ids, kinds and blocks, loop bodies, ``next`` / ``branch`` /
``loop_body`` / ``loop_back`` / ``loop_done`` edges and error routes;
:class:`langorch.domain.plan.topology.Topology` goes on from there (entry steps, reachability,
cycles, joins, outputs). The rules are in :mod:`langorch.domain.plan.topology`.
"""

from __future__ import annotations

from collections.abc import Iterator

from langorch.domain.definitions import (
    ASK,
    RESERVED_STEP_IDS,
    BlockDefinition,
    BlockType,
    KindName,
    PlanStep,
    TaskPlan,
)
from langorch.domain.errors import Problem
from langorch.domain.kinds import registry
from langorch.domain.kinds.base import StepKind
from langorch.domain.kinds.registry import unknown_kind_hint
from langorch.domain.lookup import DefinitionLookup
from langorch.domain.plan.graph import (
    FORWARD,
    Edge,
    EdgeKind,
    LoopInfo,
    closest_step,
    reach,
    unknown_step,
    where,
)
from langorch.domain.step_settings import AskSpec, LoopSpec


class Wiring:
    """The first half of a plan's topology: ids, kinds, blocks, and every edge."""

    def __init__(
        self,
        plan: TaskPlan,
        lookup: DefinitionLookup,
    ) -> None:
        """Start resolving ``plan`` against ``lookup`` (:meth:`wire` does the work).

        Args:
            plan: The workflow.
            lookup: Where referenced blocks are found.
        """
        self.plan = plan
        self.lookup = lookup
        self.problems: list[Problem] = []
        self.index: dict[str, int] = {}
        self.blocks: dict[str, BlockDefinition | None] = {}
        self.kinds: dict[str, BlockType | KindName | None] = {}
        self.specs: dict[str, StepKind | None] = {}
        """Each step's registered kind (``None`` when it has none)."""
        self.branches: dict[str, dict[str, str]] = {}
        self.loop_of: dict[str, str] = {}
        self.edges: list[Edge] = []
        self.dangling: set[str] = set()
        """Steps with a dependency that could not be wired, and the steps an unknown reference
        probably meant (already reported): they count as reachable, and their data flow is
        not checked, so one typo is reported once."""
        self.loops: dict[str, LoopInfo] = {}
        self.chained: dict[str, tuple[str, str]] = {}
        """Step -> (``chain[k]``, the step listed before it in the plan's ``chain``)."""
        self.out: dict[str, list[Edge]] = {}
        self.inc: dict[str, list[Edge]] = {}

    # -- helpers ------------------------------------------------------------------------------

    def add(self, path: str, message: str, hint: str = "") -> None:
        """Report a problem."""
        self.problems.append(Problem(path, message, hint))

    def sp(self, step_id: str) -> str:
        """The path of a step."""
        return f"steps[{self.index[step_id]}]"

    def unknown(self, path: str, target: str) -> None:
        """Report a reference to a step that does not exist; the step it probably meant is
        then ``dangling`` (its incoming edges are incomplete)."""
        self.add(path, *unknown_step(target, self.index))
        close = closest_step(target, self.index)
        if close is not None:
            self.dangling.add(close)

    def known(self, step_id: str | None) -> bool:
        """Whether ``step_id`` names a step of the plan."""
        return step_id is not None and step_id in self.index

    def dependencies(self, step: PlanStep) -> list[tuple[str, str]]:
        """``(path, step id)`` of what ``step`` runs after: its ``depends_on``, and the step
        before it in the plan's ``chain``."""
        deps = [
            (f"{self.sp(step.step_id)}.depends_on[{j}]", d) for j, d in enumerate(step.depends_on)
        ]
        chained = self.chained.get(step.step_id)
        if chained is not None and chained[1] not in step.depends_on:
            deps.append(chained)
        return deps

    def asks(self, route: str | None) -> bool:
        """Whether an ``on_error`` / ``on_failure`` value asks a person (``ask``, unless a step
        of the plan is named so: then it routes to that step, as it always did)."""
        return route == ASK and ASK not in self.index

    def asking(self, step: PlanStep) -> str | None:
        """The field that makes a failure of ``step`` ask a person: ``on_error`` (its own), or
        the plan's ``on_failure`` (for a step with no ``on_error`` that does not park);
        ``None``: it does not ask."""
        if step.on_error is not None:
            return "on_error" if self.asks(step.on_error) else None
        kind = self.specs.get(step.step_id)
        if self.asks(self.plan.on_failure) and not (kind is not None and kind.parks):
            return "on_failure"
        return None

    def ask_of(self, step: PlanStep) -> AskSpec | None:
        """Who is asked when ``step`` fails: its ``ask``, else the plan's, else the defaults
        (the plan's approvers); ``None`` when its failure asks nobody."""
        if self.asking(step) is None:
            return None
        return step.ask or self.plan.ask or AskSpec()

    def steps(self) -> Iterator[PlanStep]:
        """The steps with a unique id (a duplicate is reported once and then left out)."""
        for i, step in enumerate(self.plan.steps):
            if self.index.get(step.step_id) == i:
                yield step

    # -- the pass -----------------------------------------------------------------------------

    def wire(self) -> None:
        """Resolve every step's kind and block, then its edges; report what does not fit."""
        plan = self.plan
        self._ids()
        self._chain()
        for i, step in enumerate(plan.steps):
            if plan.steps[self.index[step.step_id]] is step:
                self._resolve(i, step)
        self._loops()
        self._wire()
        self.loops = self._loop_infos()
        self._error_routes()
        self.out, self.inc = self._adjacency()

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

    def _chain(self) -> None:
        """The plan's ``chain``: each listed step after the one before it (an unknown or
        repeated entry is reported, and the chain goes on from the last good one)."""
        before: str | None = None
        listed: set[str] = set()
        for k, sid in enumerate(self.plan.chain or []):
            path = f"chain[{k}]"
            if not self.known(sid):
                self.unknown(path, sid)
                continue
            if sid in listed:
                self.add(path, f"{sid!r} is listed twice in the chain", "list each step once")
                continue
            if before is not None:
                self.chained[sid] = (path, before)
            listed.add(sid)
            before = sid

    def _resolve(self, i: int, step: PlanStep) -> None:
        """The block and the kind of one step."""
        sid = step.step_id
        path = f"steps[{i}]"
        block: BlockDefinition | None = None
        kind: BlockType | KindName | None = step.kind
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
                if step.kind is not None and step.kind != block.block_type:
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
                f"({', '.join(k.name for k in registry.all_kinds() if not k.needs_block)})",
            )
        spec = registry.get(kind) if kind is not None else None
        if kind is not None and spec is None:
            self.add(
                f"{path}.kind",
                f"unknown kind {kind.value!r}",
                unknown_kind_hint(kind.value),
            )
        elif spec is not None and spec.needs_block and step.block_id is None:
            self.add(
                f"{path}.kind",
                f"an inline {spec.name} step has no prompt or output keys",
                "reference a block (block_id) that defines the prompt and output_keys",
            )
        self.blocks[sid] = block
        self.kinds[sid] = kind
        self.specs[sid] = spec
        labels = step.branches if step.branches is not None else (block.branches if block else None)
        self.branches[sid] = dict(labels or {}) if spec is not None and spec.branching else {}

    def loop_spec(self, step: PlanStep) -> LoopSpec | None:
        """The loop settings of a loop step (``None`` for any other step)."""
        spec = self.specs.get(step.step_id)
        return spec.loop(step) if spec is not None else None

    def _loops(self) -> None:
        """Loop body membership: each step is a direct member of at most one loop."""
        for step in self.steps():
            loop = self.loop_spec(step)
            if loop is None:
                continue
            path = f"{self.sp(step.step_id)}.loop.body"
            seen: set[str] = set()
            for j, member in enumerate(loop.body):
                if member == step.step_id:
                    self.add(
                        f"{path}[{j}]",
                        "a loop cannot contain itself",
                        "list only the steps to repeat",
                    )
                elif not self.known(member):
                    self.unknown(f"{path}[{j}]", member)
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
        for step in self.steps():
            sid = step.step_id
            reported = len(self.problems)
            for path, dep in self.dependencies(step):
                if not self.known(dep):
                    self.unknown(path, dep)
                    continue
                if dep == sid:
                    self.add(path, "a step cannot depend on itself", "remove it")
                    continue
                dep_spec = self.specs[dep]
                if dep_spec is not None and dep_spec.branching:
                    if sid not in self.branches[dep].values():
                        what = dep_spec.name
                        self.add(
                            path,
                            f"depends on {what} {dep!r} but is not one of its branch targets",
                            f"add {sid!r} to the branches of {dep!r}, or depend on a step after it",
                        )
                    continue  # the branch edge carries it
                if dep_spec is not None and dep_spec.ends_run:
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
                looped = dep_spec is not None and dep_spec.is_loop
                kind: EdgeKind = "loop_done" if looped else "next"
                self.edges.append(Edge(dep, sid, kind))
            if len(self.problems) > reported:
                # A dependency that could not be wired is reported above; the step then counts
                # as reachable, so one mistake is not reported again as unreachable steps.
                self.dangling.add(sid)
            for label, target in self.branches[sid].items():
                path = f"{self.sp(sid)}.branches.{label}"
                if not self.known(target):
                    self.unknown(path, target)
                elif self.loop_of.get(target) != self.loop_of.get(sid):
                    self.add(
                        path,
                        f"branches from {where(self.loop_of.get(sid))} to {target!r} "
                        f"{where(self.loop_of.get(target))}",
                        "a branch stays in its loop body; leave a loop through the loop step",
                    )
                    self.dangling.add(target)
                else:
                    self.edges.append(Edge(sid, target, "branch", label))

    def _error_routes(self) -> None:
        for step in self.steps():
            sid = step.step_id
            if step.on_error is not None and not self.asks(step.on_error):
                if not self.known(step.on_error):
                    self.unknown(f"{self.sp(sid)}.on_error", step.on_error)
                else:
                    self.edges.append(Edge(sid, step.on_error, "on_error"))
            kind = self.specs[sid]
            routes = list(kind.routes(step)) if kind is not None else []
            if step.on_max_iterations is not None:
                routes.append(("on_max_iterations", step.on_max_iterations))
                if step.max_iterations is None and self.loop_spec(step) is None:
                    self.add(
                        f"{self.sp(sid)}.on_max_iterations",
                        "on_max_iterations has no effect: the step has no bound",
                        "set max_iterations on the step, or remove on_max_iterations",
                    )
            for field_path, target in routes:
                if not self.known(target):
                    self.unknown(f"{self.sp(sid)}.{field_path}", target)
                else:
                    self.edges.append(Edge(sid, target, "on_max_iterations"))
        failure = self.plan.on_failure
        if failure is None or self.asks(failure):
            return
        if not self.known(failure):
            self.unknown("on_failure", failure)
            return
        out, _ = self._adjacency()
        on_route = reach([failure], out, FORWARD | {"on_error"})
        for step in self.steps():
            if step.on_error is None and step.step_id not in on_route:
                self.edges.append(Edge(step.step_id, failure, "on_failure"))

    def _adjacency(self) -> tuple[dict[str, list[Edge]], dict[str, list[Edge]]]:
        out: dict[str, list[Edge]] = {sid: [] for sid in self.index}
        inc: dict[str, list[Edge]] = {sid: [] for sid in self.index}
        for edge in self.edges:
            out[edge.source].append(edge)
            inc[edge.target].append(edge)
        return out, inc

    def _loop_infos(self) -> dict[str, LoopInfo]:
        """Body entries and exits, with their ``loop_body`` and ``loop_back`` edges."""
        out, inc = self._adjacency()
        loops: dict[str, LoopInfo] = {}
        for step in self.steps():
            sid = step.step_id
            spec = self.loop_spec(step)
            if spec is None:
                continue
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
