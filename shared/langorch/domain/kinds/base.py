"""What every step kind tells validation and the compiler, with defaults for a plain kind.

A kind is a :class:`StepKind` subclass registered by name (:mod:`.registry`). Built-in kinds keep
their settings in a field of their own on ``PlanStep`` / ``BlockDefinition`` (``http:``,
``approval:``, …: the stored format of seed 000 and since); a kind registered later keeps them
under ``settings:`` and names a pydantic ``settings_model`` that validation checks them with.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, Literal

from pydantic import BaseModel, ValidationError

from langorch.domain.errors import Problem
from langorch.domain.step_settings import IDENTIFIER, LoopSpec, Settings, mapping_source
from langorch.domain.templates import TemplateError, is_jinja, placeholders, strip_braces

if TYPE_CHECKING:
    from langorch.domain.definitions import BlockDefinition, PlanStep, TaskPlan
    from langorch.domain.lookup import DefinitionLookup

__all__ = [
    "IDENTIFIER",
    "How",
    "Read",
    "Settings",
    "StepCheck",
    "StepKind",
    "Template",
    "is_key_path",
    "json_strings",
    "key_or_template",
    "reads_of",
    "root_key",
    "settings_problems",
    "template_names",
]

How = Literal["template", "expression"]
Template = tuple[str, str, How]
"""``(path, text, how)``: a template or expression a definition holds, and where."""
Read = tuple[str, str, str]
"""``(path, key, what)``: a ``shared_context`` key a step reads, where, and how to say it."""

_KEY = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z0-9_]+)*$")
_JINJA_NAMES = frozenset(
    {"range", "dict", "lipsum", "cycler", "joiner", "namespace", "loop", "self", "caller"}
)
"""Names Jinja itself provides inside templates; never inputs."""


@dataclass(frozen=True)
class StepCheck:
    """What a kind's own checks see of one step."""

    step: PlanStep
    block: BlockDefinition | None
    """The referenced block at its resolved version (``None``: inline step)."""
    path: str
    """The step's path, ``steps[3]``."""
    branches: Mapping[str, str]
    """Label -> target, resolved from the step or its block (branching kinds)."""
    plan: TaskPlan
    lookup: DefinitionLookup


class StepKind:
    """A step kind's pure half. Subclass it, set ``name``, override what the kind needs."""

    name: ClassVar[str] = ""
    step_fields: ClassVar[frozenset[str]] = frozenset()
    """``PlanStep`` fields only this kind uses (set on another kind, they are reported)."""
    block_fields: ClassVar[frozenset[str]] = frozenset()
    """``BlockDefinition`` fields only this kind uses."""
    settings_model: ClassVar[type[BaseModel] | None] = None
    """For kinds without a field of their own: the model of their ``settings:``."""
    settings_required: ClassVar[bool] = False
    """Whether a step of this kind must have settings (``settings_model`` kinds)."""
    needs_block: ClassVar[bool] = False
    """The step must reference a block (LLM kinds: the block holds the prompt)."""
    branching: ClassVar[bool] = False
    """Routes by branch label (``branches``); depending on it means being a branch target."""
    parks: ClassVar[bool] = False
    """Parks or delegates (approval, wait, loop, subflow): no step timeout of its own."""
    ends_run: ClassVar[bool] = False
    """Nothing runs after it (terminate)."""
    is_loop: ClassVar[bool] = False
    """Repeats a body of steps; steps depending on it run after the last iteration."""

    # -- settings -----------------------------------------------------------------------------

    def settings(self, step: PlanStep, block: BlockDefinition | None) -> Any:
        """The step's settings, parsed with ``settings_model`` (else ``None``).

        Raises:
            pydantic.ValidationError: the settings do not match ``settings_model``.
        """
        raw = step.settings if step.settings is not None else (block.settings if block else None)
        if self.settings_model is None or (raw is None and self.settings_required):
            return None
        return self.settings_model.model_validate(raw or {})

    def valid_settings(self, step: PlanStep, block: BlockDefinition | None) -> Any:
        """:meth:`settings`, or ``None`` when they are invalid (validation reports that)."""
        try:
            return self.settings(step, block)
        except ValidationError:
            return None

    # -- topology -----------------------------------------------------------------------------

    def loop(self, step: PlanStep) -> LoopSpec | None:
        """The loop settings of a loop step (``None`` for other kinds)."""
        return None

    def max_iterations(self, step: PlanStep) -> int | None:
        """A bound of the kind's own that makes a cycle through the step legal."""
        return None

    def routes(self, step: PlanStep) -> Iterator[tuple[str, str]]:
        """``(field path, target)`` of routes the kind adds (``on_max_iterations`` edges)."""
        return iter(())

    # -- checks -------------------------------------------------------------------------------

    def check_step(self, c: StepCheck) -> Iterator[Problem]:
        """The kind's own problems with one step (default: its ``settings:`` against the model)."""
        if self.settings_model is None:
            return
        if c.step.settings is not None:
            yield from settings_problems(f"{c.path}.settings", c.step.settings, self.settings_model)
        elif self.settings_required and (c.block is None or c.block.settings is None):
            # A block's own settings are checked when the block is validated.
            yield Problem(
                f"{c.path}.settings",
                f"a {self.name} step needs settings",
                f"add settings: {{...}} with the fields of {self.settings_model.__name__}",
            )

    def advice(self, step: PlanStep, path: str) -> Iterator[Problem]:
        """What is valid but probably not meant (shown as warnings by ``put`` / ``validate``)."""
        return iter(())

    def step_templates(
        self, step: PlanStep, block: BlockDefinition | None, path: str
    ) -> Iterator[Template]:
        """Every template and expression of the step's own settings (not its block's)."""
        return iter(())

    def reads(self, step: PlanStep, block: BlockDefinition | None, path: str) -> Iterator[Read]:
        """Keys the step reads other than its block's inputs and its templates' names."""
        return iter(())

    def outputs(
        self, step_id: str, step: PlanStep, block: BlockDefinition | None, lookup: DefinitionLookup
    ) -> set[str]:
        """The ``shared_context`` keys a step writes (default: its block's output keys)."""
        return set(block.output_keys) if block else set()

    def check_block(self, block: BlockDefinition) -> Iterator[Problem]:
        """The kind's own problems with a block of this kind (paths relative to the block)."""
        if self.settings_model is not None and block.settings is not None:
            yield from settings_problems("settings", block.settings, self.settings_model)

    def block_templates(self, block: BlockDefinition) -> Iterator[Template]:
        """Templates of the block's kind settings; they may read only its input keys."""
        return iter(())


# --------------------------------------------------------------------------------------------
# Helpers the kinds and validation share
# --------------------------------------------------------------------------------------------


def settings_problems(path: str, raw: Any, model: type[BaseModel]) -> list[Problem]:
    """``raw`` checked against ``model``: one problem per pydantic error, at its field path."""
    try:
        model.model_validate(raw)
    except ValidationError as exc:
        problems = []
        for error in exc.errors():
            where = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in error["loc"])
            problems.append(
                Problem(
                    f"{path}{where}",
                    error["msg"],
                    f"fix the settings; {model.__name__} expects its documented fields",
                )
            )
        return problems
    return []


def template_names(text: str, how: How) -> set[str]:
    """Top-level names a template or expression reads, without Jinja's own names.

    Raises:
        TemplateError: the text is malformed.
    """
    if how == "expression":
        text = "{{ " + strip_braces(text) + " }}"
    return placeholders(text) - _JINJA_NAMES


def key_or_template(value: str) -> set[str]:
    """Names read by a field that holds a ``shared_context`` key or a template."""
    if _KEY.match(value):
        return {root_key(value)}
    try:
        if is_jinja(value):
            return template_names(value, "template")
        return template_names(value, "expression")
    except TemplateError:
        # Not an expression either: literal text, which reads nothing.
        return set()


def is_key_path(source: str) -> bool:
    """Whether an input mapping's source reads a key or a dotted path into one (not a template,
    not blank): what :func:`langorch.domain.templates.walk` can resolve."""
    return bool(source.strip()) and not any(c in source for c in "{} \t\n")


def reads_of(
    step: PlanStep, block: BlockDefinition | None, kind: StepKind | None, path: str
) -> Iterator[Read]:
    """``(path, key, what)`` for every ``shared_context`` key a step reads: its block's inputs
    (through ``input_mappings``), its templates' names, and what its kind reads besides.

    Args:
        step: the step.
        block: its block at the resolved version (``None``: an inline step).
        kind: its kind (``None``: unknown, so only the block's inputs are known).
        path: the step's path (``steps[3]``), for the reads' paths.
    """
    mappings = step.input_mappings or {}
    if block is not None:
        for key in block.input_keys:
            if key not in mappings:
                yield f"{path}.block_id", key, f"block {block.block_id!r} needs input"
    for key, mapping in mappings.items():
        source = mapping_source(mapping)
        # A block's mapping of a key it has no input for is an error (reported elsewhere); an
        # inline step's mappings are names its templates and expressions may read.
        if (block is None or key in block.input_keys) and is_key_path(source):
            yield f"{path}.input_mappings.{key}", root_key(source), f"input {key!r} reads"
    if kind is None:
        return
    for field_path, text, how in kind.step_templates(step, block, path):
        try:
            names = template_names(text, how)
        except TemplateError:
            continue  # reported as a syntax problem
        for name in sorted(names):
            yield field_path, name, "reads"
    yield from kind.reads(step, block, path)


def root_key(key: str) -> str:
    """The top-level ``shared_context`` key of a dotted path."""
    return key.split(".", 1)[0]


def json_strings(path: str, value: Any) -> Iterator[Template]:
    """Every string inside a JSON value, as a template at its path."""
    if isinstance(value, str):
        yield path, value, "template"
    elif isinstance(value, dict):
        for key, item in value.items():
            yield from json_strings(f"{path}.{key}", item)
    elif isinstance(value, list):
        for i, item in enumerate(value):
            yield from json_strings(f"{path}[{i}]", item)
