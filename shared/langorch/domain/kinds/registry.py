"""The step kinds, by name: validation and the compiler look a kind up here.

The built-in kinds load on first use (their modules are listed below); a kind added later —
by a plugin or a test — registers itself with :func:`register`, and
:func:`langorch.engine.kinds.registry.register` registers its executor beside it.
"""

from __future__ import annotations

import difflib
import importlib
from threading import Lock

from langorch.domain.kinds.base import StepKind

BUILTIN_MODULES = (
    "llm",
    "decision",
    "memory",
    "transform",
    "http",
    "read_file",
    "approval",
    "wait",
    "loop",
    "subflow",
    "terminate",
    "sequence",
    "verification",
    "llm_action",
    "attach",
)
"""Modules of ``langorch.domain.kinds`` whose ``KINDS`` are the built-in kinds."""

_KINDS: dict[str, StepKind] = {}
_lock = Lock()
_loaded = False


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
    _load_builtins()
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
    """The kind registered under ``name``, or ``None``."""
    _load_builtins()
    return _KINDS.get(str(name))


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
    _load_builtins()
    return list(_KINDS)


def all_kinds() -> list[StepKind]:
    """Every registered kind."""
    _load_builtins()
    return list(_KINDS.values())


def unknown_kind_hint(name: str) -> str:
    """How to fix a kind name nothing is registered under (the closest name, if any)."""
    close = difflib.get_close_matches(name, names(), n=1)
    known = f"registered kinds are {', '.join(names())}"
    return f"did you mean {close[0]!r}? {known}" if close else f"{known} (register yours first)"


def _load_builtins() -> None:
    global _loaded
    if _loaded:
        return
    with _lock:
        if _loaded:
            return
        for module in BUILTIN_MODULES:
            for kind in importlib.import_module(f"langorch.domain.kinds.{module}").KINDS:
                _KINDS.setdefault(kind.name, kind)
        _loaded = True
