"""Command groups of ``langorch``: one module per group, each with ``register(subparsers)``.

To add a group, write ``langorch/cli/commands/<group>.py`` (see :mod:`langorch.cli.registry`)
and append its module to :data:`GROUPS`.
"""

from __future__ import annotations

from types import ModuleType

from langorch.cli.commands import (
    agents,
    approvals,
    audit,
    blocks,
    console,
    dev,
    events,
    files,
    hooks,
    keys,
    replay,
    resources,
    runs,
    schedules,
    secrets,
    test,
    tools,
    workflows,
)

GROUPS: list[ModuleType] = [
    dev,
    console,
    blocks,
    workflows,
    tools,
    agents,
    runs,
    hooks,
    approvals,
    audit,
    files,
    events,
    keys,
    secrets,
    resources,
    schedules,
    test,
    replay,
]
"""Registered in this order; ``langorch --help`` lists them so."""
