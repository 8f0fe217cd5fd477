"""Kind name -> executor (and preparer). Built-in executors load on first use; :func:`register`
adds a kind (its pure spec to :mod:`langorch.domain.kinds.registry`, its executor here) in one
call. A kind whose step needs something loaded before its time starts names a preparer too."""

from __future__ import annotations

import importlib
from threading import Lock

from langorch.domain.kinds import registry as specs
from langorch.domain.kinds.base import StepKind
from langorch.engine.kinds.base import Executor, Preparer

BUILTIN_MODULES = specs.BUILTIN_MODULES
"""Modules of ``langorch.engine.kinds`` whose ``EXECUTORS`` run the built-in kinds (and whose
``PREPARERS``, if any, load what those kinds need before a step's time starts)."""

_EXECUTORS: dict[str, Executor] = {}
_PREPARERS: dict[str, Preparer] = {}
_lock = Lock()
_loaded = False


class NoExecutorError(LookupError):
    """A step's kind has no executor (validation rejects unknown kinds before anything runs)."""


def register(
    kind: StepKind,
    executor: Executor,
    *,
    prepare: Preparer | None = None,
    replace: bool = False,
) -> StepKind:
    """Register a kind: its spec for validation and the compiler, its executor for the node.

    Args:
        kind: The kind's pure half (name, settings, checks, reads and writes).
        executor: ``async (step, state, context, attempt) -> Outcome``.
        prepare: ``async (step, context) -> None``, run before each attempt's timeout starts.
        replace: Allow replacing a kind already registered under that name.

    Returns:
        The kind.

    Raises:
        KindRegistrationError: no name, or the name is taken and ``replace`` is false.
    """
    _load_builtins()
    specs.register(kind, replace=replace)
    with _lock:
        _EXECUTORS[kind.name] = executor
        if prepare is None:
            _PREPARERS.pop(kind.name, None)
        else:
            _PREPARERS[kind.name] = prepare
    return kind


def unregister(name: str) -> None:
    """Remove a kind added with :func:`register` (tests clean up with it)."""
    specs.unregister(name)
    with _lock:
        _EXECUTORS.pop(name, None)
        _PREPARERS.pop(name, None)


def executor(name: str) -> Executor:
    """The executor of the kind ``name``.

    Raises:
        NoExecutorError: no kind of that name has an executor.
    """
    _load_builtins()
    found = _EXECUTORS.get(str(name))
    if found is None:
        raise NoExecutorError(
            f"no executor for step kind {name!r}; register it with "
            "langorch.engine.kinds.registry.register(kind, executor)"
        )
    return found


def preparer(name: str) -> Preparer | None:
    """What the kind ``name`` loads before a step's time starts (``None``: nothing)."""
    _load_builtins()
    return _PREPARERS.get(str(name))


def _load_builtins() -> None:
    global _loaded
    if _loaded:
        return
    with _lock:
        if _loaded:
            return
        for module in BUILTIN_MODULES:
            loaded = importlib.import_module(f"langorch.engine.kinds.{module}")
            for name, run in loaded.EXECUTORS.items():
                _EXECUTORS.setdefault(name, run)
            for name, prepare in getattr(loaded, "PREPARERS", {}).items():
                _PREPARERS.setdefault(name, prepare)
        _loaded = True
