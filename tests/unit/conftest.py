"""Use-case fixtures on fakes (``tests/fakes``): no emulator, no network."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.fakes import Fakes

MakeFakes = Callable[..., Fakes]


@pytest.fixture
def make_container() -> MakeFakes:
    """Build "processes" that share one set of fake stores: a new one is a new Lambda sandbox.

    The first call makes the stores (with the built-in blocks); each later call is another
    process over them, with its own offline LLM script and no warm caches.
    """
    base: Fakes | None = None

    def make(script: dict[str, Any] | str | Path | None = None, **settings: Any) -> Fakes:
        nonlocal base
        text = str(script) if isinstance(script, Path) else script
        if base is None:
            base = Fakes(text, **settings)
            return base
        process = base.with_script(text)
        if settings:
            process.settings = base.settings.model_copy(update=settings)
        return process

    return make


@pytest.fixture
def stack() -> Any:
    """Runs parked on approvals and the approval pages, all on fakes (a ``FakeStack``)."""
    from tests.unit.approvals_support import FakeStack

    return FakeStack()


@pytest.fixture
def callback(stack: Any) -> Iterator[Any]:
    """The approval callback's handler, its container the fake stack's while the test runs."""
    from functions.approval_callback import handler

    previous = handler.container.use(stack.container)
    yield handler
    handler.container.use(previous)
