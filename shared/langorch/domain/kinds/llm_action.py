"""``llm_action``: ask an LLM inline (seed 001 §6.2) — the prompt is the step's own, no block —
and map its answer into variables with ``outputs`` (``json_extract: a.b``, ``regex: …``,
``llm_response``, or a template over ``llm_response``).

The call is a recorded side effect like every LLM call (seed 001 §5): a replay reuses the
recorded answer. What is asked for: when some output is a ``json_extract:`` mapping, the first
segments of those paths as structured fields (``output_types`` gives their JSON types); else one
text field, ``llm_response``.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Literal

from pydantic import Field

from langorch.domain.errors import Problem
from langorch.domain.kinds.base import Read, Settings, StepCheck, StepKind, Template

if TYPE_CHECKING:
    from langorch.domain.definitions import BlockDefinition, PlanStep
    from langorch.domain.lookup import DefinitionLookup

RESPONSE = "llm_response"
"""The name the model's whole answer goes by in ``outputs`` mappings."""

JsonType = Literal["string", "number", "integer", "boolean", "array", "object"]


class LlmActionSettings(Settings):
    """The prompt and how the answer maps into variables."""

    prompt: str = Field(min_length=1)
    system_prompt: str | None = None
    output_keys: list[str] = Field(default_factory=lambda: [RESPONSE])
    """The structured fields asked for (set by the compiler from ``outputs``)."""
    output_types: dict[str, JsonType] = Field(default_factory=dict)
    outputs: dict[str, str] = Field(default_factory=dict)
    """Variable -> mapping: ``llm_response``, ``json_extract: path``, ``regex: pattern`` or a
    template (``{{ llm_response.total }}``). Empty: ``<step_id>_response`` gets the answer."""
    max_prompt_chars: int | None = Field(default=None, ge=1_000, le=4_000_000)
    temperature: float | None = Field(default=None, ge=0, le=2)
    max_tokens: int | None = Field(default=None, ge=1, le=200_000)
    """Output token limit of the call (default: the procedure's, else the deployment's)."""


def output_names(step_id: str, settings: LlmActionSettings) -> set[str]:
    """The variables an llm_action writes."""
    return set(settings.outputs) or {f"{step_id}_response"}


class LlmActionKind(StepKind):
    """An inline LLM call."""

    name = "llm_action"
    settings_model = LlmActionSettings
    settings_required = True

    def check_step(self, c: StepCheck) -> Iterator[Problem]:
        """Settings match; mappings are of a known form."""
        yield from super().check_step(c)
        settings = self.valid_settings(c.step, c.block)
        if settings is None:
            return
        for name, mapping in settings.outputs.items():
            head = mapping.split(":", 1)[0].strip() if ":" in mapping else ""
            if head and head not in ("json_extract", "regex") and "{{" not in mapping:
                yield Problem(
                    f"{c.path}.settings.outputs.{name}",
                    f"unknown output mapping {head!r}",
                    "use llm_response, json_extract: <path>, regex: <pattern> or a template",
                )

    def step_templates(
        self, step: PlanStep, block: BlockDefinition | None, path: str
    ) -> Iterator[Template]:
        """The prompt and the system prompt."""
        settings = self.valid_settings(step, block)
        if settings is not None:
            yield f"{path}.settings.prompt", settings.prompt, "template"
            if settings.system_prompt:
                yield f"{path}.settings.system_prompt", settings.system_prompt, "template"

    def reads(self, step: PlanStep, block: BlockDefinition | None, path: str) -> Iterator[Read]:
        """Nothing beyond its prompt (``llm_response`` is its own)."""
        return iter(())

    def outputs(
        self, step_id: str, step: PlanStep, block: BlockDefinition | None, lookup: DefinitionLookup
    ) -> set[str]:
        """The mapped variables."""
        settings = self.valid_settings(step, block)
        keys = super().outputs(step_id, step, block, lookup)
        return keys | (output_names(step_id, settings) if settings is not None else set())


KINDS = (LlmActionKind(),)
