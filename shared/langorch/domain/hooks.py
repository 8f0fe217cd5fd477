"""What a step's ``pre`` / ``post`` hooks mean for validation: their problems, the templates
and expressions they hold, what they write (the executing half is
:mod:`langorch.engine.hooks`)."""

from __future__ import annotations

from collections.abc import Iterator

from langorch.domain.errors import Problem
from langorch.domain.kinds.base import Template, json_strings
from langorch.domain.step_settings import Hook, StepHooks


def hooks_of(hooks: StepHooks | None, path: str) -> Iterator[tuple[str, str, Hook]]:
    """``(path, phase, hook)`` of every hook, ``pre`` first (``steps[2].hooks.pre[0]``)."""
    if hooks is None:
        return
    for phase, listed in (("pre", hooks.pre), ("post", hooks.post)):
        for index, hook in enumerate(listed):
            yield f"{path}.hooks.{phase}[{index}]", phase, hook


def hook_problems(hooks: StepHooks | None, path: str) -> Iterator[Problem]:
    """Each hook is exactly one of a transform or a tool call, with only that one's fields."""
    for where, _, hook in hooks_of(hooks, path):
        if (hook.transform is None) == (hook.tool is None):
            yield Problem(
                where,
                "a hook is exactly one of a transform or a tool call",
                "write {transform: {key: expression}} or {tool: NAME, args: {...}}",
            )
        elif hook.transform is not None:
            for name in ("args", "output_key"):
                if name in hook.model_fields_set:
                    yield Problem(
                        f"{where}.{name}",
                        f"{name} is for a tool call; this hook is a transform",
                        f"remove {name}",
                    )
            if not hook.transform:
                yield Problem(
                    f"{where}.transform",
                    "the hook's transform computes nothing",
                    "add {key: expression}, or remove the hook",
                )


def hook_templates(hooks: StepHooks | None, path: str) -> Iterator[Template]:
    """The hooks' expressions (transforms) and templates (strings in a tool's args)."""
    for where, _, hook in hooks_of(hooks, path):
        for key, expression in (hook.transform or {}).items():
            yield f"{where}.transform.{key}", expression, "expression"
        yield from json_strings(f"{where}.args", hook.args)


def hook_outputs(hooks: StepHooks | None, phase: str | None = None) -> set[str]:
    """The keys the hooks write (``phase``: only ``pre`` or ``post`` ones)."""
    return {
        key
        for _, at, hook in hooks_of(hooks, "")
        if phase is None or at == phase
        for key in hook.written()
    }


def hook_tools(hooks: StepHooks | None, path: str) -> Iterator[tuple[str, str]]:
    """``(path, tool)`` of each tool a hook calls."""
    for where, _, hook in hooks_of(hooks, path):
        if hook.tool is not None:
            yield f"{where}.tool", hook.tool
