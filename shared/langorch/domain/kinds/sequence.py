"""``sequence``: a CKP node's steps in order — each an action of the catalog, performed by a
built-in action, a registered agent or an MCP tool — then the node's validations.

A CKP ``sequence``, ``processing`` or ``transform`` node compiles to one step of this kind
(:mod:`langorch.domain.ckp.compiler`); so does a ``parallel`` node (no steps: it only forks).
Which executor performs each action is bound when the procedure is stored and again when the
step runs (:mod:`langorch.domain.ckp.binding`); the settings keep what the author wrote.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any, Literal

from pydantic import Field

from langorch.domain.errors import Problem
from langorch.domain.kinds.base import Read, Settings, StepCheck, StepKind, template_names
from langorch.domain.templates import TemplateError, check, check_expression

if TYPE_CHECKING:
    from langorch.domain.definitions import BlockDefinition, PlanStep
    from langorch.domain.lookup import DefinitionLookup

EXPRESSION_PARAMS = frozenset({"expression", "condition"})
"""Parameters that hold an expression the action evaluates itself (per item for ``filter`` and
``map``), never rendered beforehand."""

SECRETS = "secrets"
"""The name templates read secrets through (``{{ secrets["id"] }}``): resolved when a step runs,
never a variable of the run."""


class ActionStep(Settings):
    """One step of a sequence: an action and its parameters (templates inside)."""

    id: str
    """The CKP ``step_id`` (else ``step<N>``): how the timeline names the step."""
    at: str = ""
    """Where it was written in its node (``steps[2]``), for messages."""
    action: str
    params: dict[str, Any] = Field(default_factory=dict)
    """Everything else the author wrote: ``target``, ``url``, ``value``, ``keys``, ``query``…"""
    output_variable: str | None = None
    timeout_ms: int | None = Field(default=None, ge=1, le=900_000)
    wait_ms: int | None = Field(default=None, ge=0, le=600_000)
    """Wait before the action."""
    wait_after_ms: int | None = Field(default=None, ge=0, le=600_000)
    continue_on_error: bool = False
    """A failure is recorded and the next step runs (CKP ``continue_on_error``)."""


class Check(Settings):
    """A condition the node's results must meet (CKP ``validations`` / ``checks``)."""

    id: str
    at: str = ""
    condition: str
    """A langorch expression (compiled from CKP's ``{{x}} > 3``)."""
    on_fail: Literal["fail", "warn", "route"] = "fail"
    route_to: str | None = None
    """``route``: the node to go to when the check fails."""
    message: str = ""


class ErrorHandler(Settings):
    """What a node does when one of its steps fails (CKP ``error_handlers``)."""

    at: str = ""
    error_type: str = "*"
    """The error's name (``HttpStepError``, ``AgentCallError``…) or ``*`` for any."""
    text_contains: str | None = None
    ignore: bool = False
    """Record the failure and go on with the next step (``ignore`` / ``continue``)."""
    recovery_steps: list[ActionStep] = Field(default_factory=list)
    """Run after the node's last attempt failed, before it fails (or falls back)."""


class SequenceSettings(Settings):
    """A node's steps, checks and error handlers."""

    agent: str | None = None
    """The node's agent (CKP ``agent``): a registered agent's name, or ``MasterAgent``."""
    steps: list[ActionStep] = Field(default_factory=list)
    checks: list[Check] = Field(default_factory=list)
    handlers: list[ErrorHandler] = Field(default_factory=list)
    idempotency_key: str | None = None
    """A template whose value keys the node's external calls (default: run, node, visit)."""


def settings_of(step: PlanStep) -> SequenceSettings:
    """The step's sequence settings (empty when it has none: a fork)."""
    return SequenceSettings.model_validate(step.settings or {})


def action_templates(action: ActionStep) -> Iterator[tuple[str, str, str]]:
    """``(where, text, how)`` of every template and expression of one action's parameters."""
    for where, text in _strings(f"{action.at}.params" if action.at else "params", action.params):
        name = where.rsplit(".", 1)[-1]
        yield where, text, ("expression" if name in EXPRESSION_PARAMS else "template")


def _strings(path: str, value: Any) -> Iterator[tuple[str, str]]:
    if isinstance(value, str):
        yield path, value
    elif isinstance(value, dict):
        for key, item in value.items():
            yield from _strings(f"{path}.{key}", item)
    elif isinstance(value, list):
        for i, item in enumerate(value):
            yield from _strings(f"{path}[{i}]", item)


def _names(text: str, how: str) -> set[str]:
    try:
        if how == "expression":
            return template_names(text, "expression")
        return template_names(text, "template") if "{{" in text or "{%" in text else set()
    except TemplateError:
        return set()


class SequenceKind(StepKind):
    """Perform a node's actions in order."""

    name = "sequence"
    settings_model = SequenceSettings

    def check_step(self, c: StepCheck) -> Iterator[Problem]:
        """Settings match the model; templates and conditions parse."""
        yield from super().check_step(c)
        settings = self.valid_settings(c.step, c.block)
        if settings is None:
            return
        for action in _all_actions(settings):
            for where, text, how in action_templates(action):
                error = check(text) if how == "template" else check_expression(text)
                if error is not None:
                    yield Problem(f"{c.path}.settings.{where}", f"malformed {how}: {error}")
        for check_ in settings.checks:
            error = check_expression(check_.condition)
            if error is not None:
                yield Problem(f"{c.path}.settings.{check_.at}.condition", error)

    def reads(self, step: PlanStep, block: BlockDefinition | None, path: str) -> Iterator[Read]:
        """Names its parameters and checks read, but not what its own earlier steps wrote,
        the per-item names of ``filter``/``map``, or secrets."""
        settings = self.valid_settings(step, block)
        if settings is None:
            return
        written: set[str] = {SECRETS, "item"}
        for action in settings.steps:
            item = action.params.get("item_variable")
            own = {item} if isinstance(item, str) else set()
            for where, text, how in action_templates(action):
                for name in sorted(_names(text, how) - written - own):
                    yield f"{path}.settings.{where}", name, "reads"
            if action.output_variable:
                written.add(action.output_variable)
            written |= _writes(action)
        for check_ in settings.checks:
            for name in sorted(_names(check_.condition, "expression") - written):
                yield f"{path}.settings.{check_.at}.condition", name, "checks"

    def outputs(
        self, step_id: str, step: PlanStep, block: BlockDefinition | None, lookup: DefinitionLookup
    ) -> set[str]:
        """Every step's ``output_variable`` (and what ``set_variable`` / ``append_to_array``
        name)."""
        keys = super().outputs(step_id, step, block, lookup)
        settings = self.valid_settings(step, block)
        if settings is not None:
            for action in _all_actions(settings):
                if action.output_variable:
                    keys.add(action.output_variable)
                keys |= _writes(action)
        return keys


def reads_of(action: ActionStep) -> frozenset[str]:
    """The variables an action's parameters read (for grouping steps into one agent call)."""
    names: set[str] = set()
    for _, text, how in action_templates(action):
        names |= _names(text, how)
    return frozenset(names - {SECRETS})


def writes_of(action: ActionStep) -> frozenset[str]:
    """The variables an action writes."""
    written = _writes(action)
    if action.output_variable:
        written.add(action.output_variable)
    return frozenset(written)


def _writes(action: ActionStep) -> set[str]:
    """Variables an action names as its target besides ``output_variable``."""
    target = action.params.get("variable") if action.action == "set_variable" else None
    if action.action == "append_to_array":
        target = action.params.get("array")
    return {target} if isinstance(target, str) and target else set()


def _all_actions(settings: SequenceSettings) -> Iterator[ActionStep]:
    yield from settings.steps
    for handler in settings.handlers:
        yield from handler.recovery_steps


KINDS = (SequenceKind(),)
