"""``wait``: sleep for a duration or until a time, without a Lambda running."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime
from typing import TYPE_CHECKING

from langorch.domain.errors import Problem
from langorch.domain.kinds.base import StepCheck, StepKind, Template
from langorch.domain.templates import is_jinja

if TYPE_CHECKING:
    from langorch.domain.definitions import BlockDefinition, PlanStep
    from langorch.domain.lookup import DefinitionLookup


class WaitKind(StepKind):
    """Park the run for a while (a Step Functions ``Wait``)."""

    name = "wait"
    step_fields = frozenset({"wait"})
    parks = True

    def check_step(self, c: StepCheck) -> Iterator[Problem]:
        """Exactly one of seconds or until; a literal time is ISO-8601."""
        spec, path = c.step.wait, c.path
        if spec is None or (spec.seconds is None) == (spec.until is None):
            yield Problem(
                f"{path}.wait",
                "a wait step needs exactly one of seconds or until",
                "add wait: {seconds: 300} or wait: {until: '2030-01-01T09:00:00Z'}",
            )
            return
        if isinstance(spec.seconds, int) and spec.seconds < 0:
            yield Problem(f"{path}.wait.seconds", "seconds must not be negative", "use 0 or more")
        if spec.until is not None and not is_jinja(spec.until):
            try:
                datetime.fromisoformat(spec.until)
            except ValueError:
                yield Problem(
                    f"{path}.wait.until",
                    f"{spec.until!r} is not an ISO-8601 time",
                    "write e.g. 2030-01-01T09:00:00+00:00, or a template that renders one",
                )

    def step_templates(
        self, step: PlanStep, block: BlockDefinition | None, path: str
    ) -> Iterator[Template]:
        """``seconds`` when it is a template, and ``until``."""
        if step.wait is not None:
            if isinstance(step.wait.seconds, str):
                yield f"{path}.wait.seconds", step.wait.seconds, "template"
            if step.wait.until is not None:
                yield f"{path}.wait.until", step.wait.until, "template"

    def outputs(
        self, step_id: str, step: PlanStep, block: BlockDefinition | None, lookup: DefinitionLookup
    ) -> set[str]:
        """``<step_id>_waited``: how long it slept."""
        return super().outputs(step_id, step, block, lookup) | {f"{step_id}_waited"}


KINDS = (WaitKind(),)
