"""The step kinds, by name: validation and the compiler look a kind up here.

A built-in kind loads on first use, alone: its name says its module (:data:`BUILTIN_KINDS`), so
validating a workflow imports the kinds its steps use, not all of them (issue 26: ``workflows
validate`` in 0.3 s). The ``PlanStep`` / ``BlockDefinition`` fields each built-in kind owns are
listed here too (:data:`BUILTIN_FIELDS`): validation reports a field set on a step of another
kind without loading every kind to ask it (``tests/unit/test_kind_registry.py`` checks both
tables against the kinds). A kind added later — by a plugin or a test — registers itself with
:func:`register`, and :func:`langorch.engine.kinds.registry.register` registers its executor
beside it.
"""

from __future__ import annotations

import difflib
import importlib
from collections.abc import Mapping
from threading import RLock
from typing import Literal

from langorch.domain.kinds.base import StepKind

BUILTIN_KINDS: Mapping[str, str] = {
    "action": "llm",
    "extraction": "llm",
    "decision": "decision",
    "query_memory": "memory",
    "save_memory": "memory",
    "transform": "transform",
    "http": "http",
    "read_file": "read_file",
    "approval": "approval",
    "wait": "wait",
    "loop": "loop",
    "subflow": "subflow",
    "terminate": "terminate",
    "sequence": "sequence",
    "verification": "verification",
    "llm_action": "llm_action",
    "attach": "attach",
}
"""Each built-in kind's name -> the module of ``langorch.domain.kinds`` whose ``KINDS`` holds
it, in the order :func:`names` lists them."""

BUILTIN_MODULES = tuple(dict.fromkeys(BUILTIN_KINDS.values()))
"""Modules of ``langorch.domain.kinds`` whose ``KINDS`` are the built-in kinds."""

FieldsOf = Literal["step_fields", "block_fields"]

BUILTIN_FIELDS: Mapping[str, Mapping[FieldsOf, frozenset[str]]] = {
    "decision": {
        "step_fields": frozenset({"condition", "cases", "default_branch", "branches"}),
        "block_fields": frozenset({"branches"}),
    },
    "query_memory": {"step_fields": frozenset({"memory"}), "block_fields": frozenset({"memory"})},
    "save_memory": {"step_fields": frozenset({"memory"}), "block_fields": frozenset({"memory"})},
    "transform": {
        "step_fields": frozenset({"transform"}),
        "block_fields": frozenset({"transform"}),
    },
    "http": {"step_fields": frozenset({"http"}), "block_fields": frozenset({"http"})},
    "read_file": {
        "step_fields": frozenset({"read_file"}),
        "block_fields": frozenset({"read_file"}),
    },
    "approval": {
        "step_fields": frozenset({"approval", "branches"}),
        "block_fields": frozenset({"branches"}),
    },
    "wait": {"step_fields": frozenset({"wait"})},
    "loop": {"step_fields": frozenset({"loop"})},
    "subflow": {"step_fields": frozenset({"subflow"})},
    "terminate": {"step_fields": frozenset({"terminate"})},
    "verification": {"step_fields": frozenset({"branches"})},
}
"""The ``step_fields`` / ``block_fields`` of the built-in kinds that own fields (the others
own none): what each kind's class says, readable before it is loaded."""

_KINDS: dict[str, StepKind] = {}
_lock = RLock()
_loaded_modules: set[str] = set()


class KindRegistrationError(ValueError):
    """A kind was registered twice under one name, or without a name."""


def register(kind: StepKind, *, replace: bool = False) -> StepKind:
    """Add a kind under its ``name``.

    Args:
        kind: The kind.
        replace: Allow replacing a kind already registered under that name.

    Returns:
        The kind (so a module can write ``SHOUT = register(Shout())``).

    Raises:
        KindRegistrationError: no name, or the name is taken and ``replace`` is false.
    """
    if kind.name in BUILTIN_KINDS:
        _load(BUILTIN_KINDS[kind.name])  # a built-in's name is taken even before it loads
    if not kind.name:
        raise KindRegistrationError(f"{type(kind).__name__} has no name; set name = '...'")
    with _lock:
        if kind.name in _KINDS and not replace and _KINDS[kind.name] is not kind:
            raise KindRegistrationError(
                f"kind {kind.name!r} is already registered; pick another name or pass replace=True"
            )
        _KINDS[kind.name] = kind
    return kind


def unregister(name: str) -> None:
    """Remove a kind added with :func:`register` (tests clean up with it)."""
    with _lock:
        _KINDS.pop(name, None)


def get(name: str) -> StepKind | None:
    """The kind registered under ``name``, or ``None`` (a built-in loads its module alone)."""
    name = str(name)
    if name not in _KINDS and name in BUILTIN_KINDS:
        _load(BUILTIN_KINDS[name])
    return _KINDS.get(name)


def require(name: str) -> StepKind:
    """The kind registered under ``name``.

    Raises:
        KeyError: no such kind (validation reports unknown kinds before anything runs).
    """
    kind = get(name)
    if kind is None:
        raise KeyError(f"unknown step kind {name!r}; registered kinds are {', '.join(names())}")
    return kind


def names() -> list[str]:
    """Every registered kind's name, built-ins first, in registration order."""
    return [kind.name for kind in all_kinds()]


def all_kinds() -> list[StepKind]:
    """Every registered kind: the built-ins in :data:`BUILTIN_KINDS`' order, then the others in
    registration order (every built-in module is loaded)."""
    for module in BUILTIN_MODULES:
        _load(module)
    with _lock:
        builtin = [_KINDS[name] for name in BUILTIN_KINDS if name in _KINDS]
        added = [kind for name, kind in _KINDS.items() if name not in BUILTIN_KINDS]
    return [*builtin, *added]


def owned_fields(fields_of: FieldsOf) -> frozenset[str]:
    """The fields some registered kind owns (``step_fields`` or ``block_fields``), loading no
    built-in kind: the built-ins' from :data:`BUILTIN_FIELDS`, unless another kind replaced
    one, then the loaded and added kinds' own."""
    with _lock:
        registered = dict(_KINDS)
    owned: set[str] = set()
    for name, fields in BUILTIN_FIELDS.items():
        if name not in registered:
            owned |= fields.get(fields_of, frozenset())
    for kind in registered.values():
        owned |= getattr(kind, fields_of)
    return frozenset(owned)


def unknown_kind_hint(name: str) -> str:
    """How to fix a kind name nothing is registered under (the closest name, if any)."""
    close = difflib.get_close_matches(name, names(), n=1)
    known = f"registered kinds are {', '.join(names())}"
    return f"did you mean {close[0]!r}? {known}" if close else f"{known} (register yours first)"


def _load(module: str) -> None:
    """Register the kinds of ``langorch.domain.kinds.<module>`` (once; a kind registered under
    one of their names before keeps it)."""
    if module in _loaded_modules:
        return
    with _lock:
        if module in _loaded_modules:
            return
        for kind in importlib.import_module(f"langorch.domain.kinds.{module}").KINDS:
            _KINDS.setdefault(kind.name, kind)
        _loaded_modules.add(module)
