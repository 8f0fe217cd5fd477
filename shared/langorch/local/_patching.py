"""Replacing a name in third-party modules (moto) for the local emulator, with its undo."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


def replace_in(
    module_names: list[str], attribute: str, replacement: Callable[[Any], Any]
) -> Callable[[], None]:
    """Set ``attribute`` of each module to ``replacement(its value)``; returns the undo."""
    from importlib import import_module

    modules = [import_module(name) for name in module_names]
    originals = [getattr(module, attribute) for module in modules]
    for module, original in zip(modules, originals, strict=True):
        setattr(module, attribute, replacement(original))

    def undo() -> None:
        for module, original in zip(modules, originals, strict=True):
            setattr(module, attribute, original)

    return undo
