"""Command groups of ``langorch``: one module per group, each with ``register(subparsers)``.

To add a group, write ``langorch/cli/commands/<group>.py`` (see :mod:`langorch.cli.registry`)
and append a :class:`Group` naming it to :data:`GROUPS`. A command line loads only the groups
it names (:func:`langorch.cli.main.build_parser`): ``langorch runs list`` never imports the
modules of ``dev`` or ``workflows``, and ``langorch --help`` imports none.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from types import ModuleType


@dataclass(frozen=True)
class Group:
    """A command group: its name on the command line and its one-line help.

    The help is written here, not only in the module, so ``langorch --help`` lists every group
    without importing one (``tests/unit/test_cli_main.py`` checks that the two agree).
    """

    name: str
    help: str

    def load(self) -> ModuleType:
        """The group's module, ``langorch.cli.commands.<name>`` (imported on first use)."""
        return importlib.import_module(f"{__name__}.{self.name}")


GROUPS: tuple[Group, ...] = (
    Group("dev", "run langorch on this machine (AWS emulator)"),
    Group("console", "runs, graphs, timelines and approvals in a browser"),
    Group("blocks", "register and inspect blocks"),
    Group("workflows", "register, validate and inspect workflows"),
    Group("tools", "register MCP tool servers blocks may call"),
    Group("agents", "register the agents CKP procedures' nodes name"),
    Group("runs", "start and inspect runs"),
    Group("hooks", "deliver signed webhooks"),
    Group("approvals", "inspect approvals and their audit trail"),
    Group("audit", "approval evidence: export a ledger, verify one"),
    Group("files", "drop files into the watched bucket"),
    Group("events", "put events on an EventBridge bus"),
    Group("keys", "rotate the approval-link signing key"),
    Group("secrets", "store secrets the functions read (never shown)"),
    Group("resources", "declare and inspect resource limits"),
    Group("schedules", "pause, resume and backfill workflows' schedules"),
    Group("triggers", "inspect what starts a workflow's runs"),
    Group("queues", "redrive the stack's dead-letter queues"),
    Group("test", "run workflow tests (tests.yaml) offline: no AWS, no network"),
    Group(
        "replay",
        "re-run recorded runs on a candidate version, calls and decisions served from the "
        "records (nothing is sent)",
    ),
)
"""Registered in this order; ``langorch --help`` lists them so."""
