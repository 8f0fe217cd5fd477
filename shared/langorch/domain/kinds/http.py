"""``http``: an outbound call with a stable idempotency key per run+step+round."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from langorch.domain.errors import Problem
from langorch.domain.kinds.base import StepCheck, StepKind, Template, json_strings
from langorch.domain.step_settings import HttpSpec

if TYPE_CHECKING:
    from langorch.domain.definitions import BlockDefinition, PlanStep
    from langorch.domain.lookup import DefinitionLookup


def http_spec(step: PlanStep, block: BlockDefinition | None) -> HttpSpec | None:
    """The step's http settings, else its block's."""
    return step.http or (block.http if block else None)


def http_templates(path: str, http: HttpSpec) -> Iterator[Template]:
    """The URL, each header and every string of the body."""
    yield f"{path}.url", http.url, "template"
    for name, value in http.headers.items():
        yield f"{path}.headers.{name}", value, "template"
    yield from json_strings(f"{path}.body", http.body)


class HttpKind(StepKind):
    """Call a URL; the response lands in ``shared_context``."""

    name = "http"
    step_fields = frozenset({"http"})
    block_fields = frozenset({"http"})

    def check_step(self, c: StepCheck) -> Iterator[Problem]:
        """Settings exist, on the step or its block."""
        if c.step.http is None and (c.block is None or not c.block.http):
            yield Problem(
                f"{c.path}.http", "an http step needs http settings", "add http: {url: ...}"
            )

    def step_templates(
        self, step: PlanStep, block: BlockDefinition | None, path: str
    ) -> Iterator[Template]:
        """The step's own http templates."""
        if step.http is not None:
            yield from http_templates(f"{path}.http", step.http)

    def outputs(
        self, step_id: str, step: PlanStep, block: BlockDefinition | None, lookup: DefinitionLookup
    ) -> set[str]:
        """``response_key``, else the block's first output key, else ``<step_id>_response``."""
        keys = super().outputs(step_id, step, block, lookup)
        http = http_spec(step, block)
        if http is not None and http.response_key:
            keys.add(http.response_key)
        elif not keys:
            keys.add(f"{step_id}_response")
        return keys

    def check_block(self, block: BlockDefinition) -> Iterator[Problem]:
        """An http block names its URL."""
        yield from super().check_block(block)
        if block.http is None:
            yield Problem("http", "an http block needs http settings", "add http: {url: ...}")

    def block_templates(self, block: BlockDefinition) -> Iterator[Template]:
        """The block's http templates."""
        if block.http is not None:
            yield from http_templates("http", block.http)


KINDS = (HttpKind(),)
