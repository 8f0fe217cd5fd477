"""Whether a workflow's event triggers have a deployed EventBridge rule.

The stack creates one rule per event trigger of the workflow files listed in ``cdk.json``'s
``event_workflows`` (files, or folders of them): a rule is infrastructure, so a workflow put
from a file that list does not cover matches no event in the cloud until it is listed and the
stack deployed again. ``workflows put`` says so (the local stack's bus needs no rule).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from langorch.domain.definitions import TaskPlan


def covered(file: Path, event_workflows: Sequence[str], base: Path) -> bool:
    """Whether ``file`` is one of ``event_workflows`` (relative to ``base``) or in one of its
    folders."""
    target = file.resolve()
    for source in event_workflows:
        listed = (base / source).resolve()
        if target == listed or listed in target.parents:
            return True
    return False


def unruled_event_triggers(
    plans: Sequence[tuple[Path, TaskPlan]], event_workflows: Sequence[str] | None, base: Path
) -> list[str]:
    """A warning for each workflow with an event trigger whose file ``event_workflows`` does
    not list.

    Args:
        plans: each workflow put, with the file it came from.
        event_workflows: ``cdk.json``'s list (``None``: no ``cdk.json`` was found).
        base: the folder ``cdk.json`` is in (its paths are relative to it).
    """
    warnings = []
    for file, plan in plans:
        if not any(t.type == "event" for t in plan.triggers):
            continue
        if event_workflows is None:
            warnings.append(
                f"workflow {plan.plan_id} has an event trigger, and no cdk.json was found here to "
                "tell whether the stack has its EventBridge rule: run from the project folder, "
                f"or make sure {file} is listed in event_workflows and deployed"
            )
        elif not covered(file, event_workflows, base):
            warnings.append(
                f"workflow {plan.plan_id} has an event trigger but no deployed rule: {file} is not "
                "in cdk.json's event_workflows, so no event starts it in the cloud; add it there "
                "and run `cdk deploy`"
            )
    return warnings
