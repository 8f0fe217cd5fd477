"""``verification``: evaluate checks over the run's variables; a failing check fails the node,
warns (the timeline says so, the run goes on) or routes to another node (seed 001 §6.2).

Branch labels: ``passed`` (every check held, or only warned) and, for each check that routes,
its ``id``. A verification without a ``passed`` branch ends the run when it passes.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from pydantic import Field

from langorch.domain.errors import Problem
from langorch.domain.kinds.base import Read, Settings, StepCheck, StepKind, template_names
from langorch.domain.kinds.sequence import Check
from langorch.domain.templates import TemplateError, check_expression

if TYPE_CHECKING:
    from langorch.domain.definitions import BlockDefinition, PlanStep

PASSED = "passed"
"""The branch a verification takes when no check fails (or failing ones only warn)."""


class VerificationSettings(Settings):
    """The checks, in order."""

    checks: list[Check] = Field(min_length=1)


class VerificationKind(StepKind):
    """Check conditions; fail, warn or route."""

    name = "verification"
    settings_model = VerificationSettings
    settings_required = True
    branching = True
    step_fields = frozenset({"branches"})

    def check_step(self, c: StepCheck) -> Iterator[Problem]:
        """Conditions parse; each routing check has a branch, every branch a check."""
        yield from super().check_step(c)
        settings = self.valid_settings(c.step, c.block)
        if settings is None:
            return
        labels = dict(c.branches)
        for check_ in settings.checks:
            where = f"{c.path}.settings.{check_.at or 'checks'}"
            error = check_expression(check_.condition)
            if error is not None:
                yield Problem(f"{where}.condition", error, "fix the condition's syntax")
            if check_.on_fail == "route" and check_.id not in labels:
                yield Problem(
                    f"{where}.on_fail",
                    f"check {check_.id!r} routes, but the step has no branch {check_.id!r}",
                    "name the node it goes to",
                )
        known = {PASSED} | {k.id for k in settings.checks if k.on_fail == "route"}
        for label in labels:
            if label not in known:
                yield Problem(
                    f"{c.path}.branches.{label}",
                    f"{label!r} is neither 'passed' nor a routing check's id",
                    f"use one of {', '.join(sorted(known))}",
                )

    def reads(self, step: PlanStep, block: BlockDefinition | None, path: str) -> Iterator[Read]:
        """The names the conditions read."""
        settings = self.valid_settings(step, block)
        if settings is None:
            return
        for check_ in settings.checks:
            try:
                names = template_names(check_.condition, "expression")
            except TemplateError:
                continue
            for name in sorted(names):
                yield f"{path}.settings.{check_.at}.condition", name, "checks"


KINDS = (VerificationKind(),)
