"""Compare two versions of a workflow against a run's state: may the run move onto the new one?

Pure: the plans, their resolved blocks and the run's ``shared_context`` come in; a
:class:`VersionDiff` comes out, with every problem named by its field path. A redrive onto a
newer version (``langorch runs redrive --version``) refuses a move with problems unless forced.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from langorch.domain.definitions import BlockDefinition, PlanStep, TaskPlan
from langorch.domain.errors import Problem
from langorch.domain.lookup import DefinitionLookup


@dataclass(frozen=True)
class VersionDiff:
    """What changed between two versions, and what of it the run cannot carry."""

    from_version: int
    to_version: int
    added: tuple[str, ...] = ()
    removed: tuple[str, ...] = ()
    changed: tuple[str, ...] = ()
    problems: tuple[Problem, ...] = field(default_factory=tuple)

    @property
    def compatible(self) -> bool:
        """No problems: the run can move onto the new version."""
        return not self.problems

    def to_dict(self) -> dict[str, Any]:
        """The diff as JSON (``--json``, the timeline)."""
        return {
            "from_version": self.from_version,
            "to_version": self.to_version,
            "added": list(self.added),
            "removed": list(self.removed),
            "changed": list(self.changed),
            "problems": [str(p) for p in self.problems],
        }


def _fingerprint(step: PlanStep | None, block: BlockDefinition | None) -> str:
    # What a step does: its own settings and its block's content; not the block's version
    # number nor bookkeeping (created_by), so re-registering the same content is no change.
    data = {
        "step": step.model_dump(mode="json", exclude={"block_version", "name"}) if step else None,
        "block": block.model_dump(mode="json", exclude={"version", "created_by", "name"})
        if block
        else None,
    }
    return json.dumps(data, sort_keys=True, default=str)


def compare_versions(
    old: TaskPlan,
    old_blocks: Mapping[str, BlockDefinition | None],
    new: TaskPlan,
    new_blocks: Mapping[str, BlockDefinition | None],
    *,
    state: Mapping[str, Any],
    remaining: Iterable[str],
    lookup: DefinitionLookup,
) -> VersionDiff:
    """Compare ``old`` and ``new`` for a run whose ``shared_context`` is ``state``.

    Args:
        old: the version the run is on; ``old_blocks`` its steps' blocks (by step id).
        new: the version it would move to; ``new_blocks`` likewise.
        state: the run's ``shared_context`` at the redrive point, with the ids of the steps
            whose results it holds (their ``results``: ``analyze.output`` reads them).
        remaining: the steps still to run (from the redrive point on), in order.
        lookup: where ``new``'s blocks are found (to know what each step reads).

    Returns:
        The steps added, removed and changed, and the problems: a step due at the redrive point
        that ``new`` removed, and input keys a remaining step needs that neither the state nor
        an earlier remaining step provides.
    """
    old_steps = {s.step_id: s for s in old.steps}
    new_steps = {s.step_id: s for s in new.steps}
    added = tuple(s for s in new_steps if s not in old_steps)
    removed = tuple(s for s in old_steps if s not in new_steps)
    changed = tuple(
        s
        for s in new_steps
        if s in old_steps
        and _fingerprint(old_steps[s], old_blocks.get(s))
        != _fingerprint(new_steps[s], new_blocks.get(s))
    )
    due = list(remaining)
    problems = _removed_due(new, due) + _missing_keys(new, lookup, state, due)
    return VersionDiff(
        from_version=old.version,
        to_version=new.version,
        added=added,
        removed=removed,
        changed=changed,
        problems=tuple(problems),
    )


def _removed_due(new: TaskPlan, remaining: Iterable[str]) -> list[Problem]:
    steps = {s.step_id for s in new.steps}
    return [
        Problem(
            f"steps.{step_id}",
            f"the run is due to run step {step_id}, which version {new.version} removed",
            "redrive --from a step that exists in both versions",
        )
        for step_id in remaining
        if step_id not in steps
    ]


def _missing_keys(
    new: TaskPlan, lookup: DefinitionLookup, state: Mapping[str, Any], remaining: Iterable[str]
) -> list[Problem]:
    """Keys a remaining step reads that neither the state nor an earlier remaining step has."""
    from langorch.domain.plan.topology import Topology
    from langorch.domain.validation import BUILTIN_KEYS, step_reads

    topology = Topology(new, lookup)
    steps = {s.step_id: s for s in new.steps}
    provided = set(state) | BUILTIN_KEYS
    problems: list[Problem] = []
    for step_id in remaining:
        step = steps.get(step_id)
        if step is None:
            continue
        for path, key, what in step_reads(topology, step):
            if key not in provided:
                problems.append(
                    Problem(
                        path,
                        f"step {step_id} {what} {key!r}, which the run's state lacks and no "
                        "earlier step provides",
                        f"fork the run with --set {key}=JSON, choose another version, or --force",
                    )
                )
                provided.add(key)  # once per key
        # What it writes, and its result under its id (analyze.output) for the steps after it.
        provided |= topology.outputs.get(step_id, frozenset()) | {step_id}
    return problems
