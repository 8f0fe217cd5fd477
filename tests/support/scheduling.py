"""How ``make test`` splits the suite between its two pytest-xdist workers (``--dist loadfile``).

Each worker runs whole test files, so a module-scoped stack is shared as written. A
session-scoped fixture, though, is built once per worker that needs it: the synthesized CDK
stack (``tests/infra/conftest.py``: a Node process running aws-cdk-lib, 10-20 s of CPU) was
built by both workers, since the infra files were spread over the two. Here the files of a
folder whose tests share a session fixture go to one worker together, as one unit of work; every
other file is still a unit of its own.
"""

from __future__ import annotations

from typing import Any

from xdist.scheduler import LoadFileScheduling

SHARED_SESSION_FOLDERS = ("tests/infra/",)
"""Folders whose files read one session-scoped fixture (the synthesized stack)."""


class LoadFileSharingSessions(LoadFileScheduling):
    """``--dist loadfile``, with each folder of :data:`SHARED_SESSION_FOLDERS` one unit."""

    def _split_scope(self, nodeid: str) -> str:
        path = super()._split_scope(nodeid)
        for folder in SHARED_SESSION_FOLDERS:
            if path.startswith(folder):
                return folder
        return path


def make_scheduler(config: Any, log: Any) -> LoadFileScheduling | None:
    """The scheduler for ``--dist loadfile`` (``None``: xdist's own choice for other modes)."""
    if config.getvalue("dist") != "loadfile":
        return None
    return LoadFileSharingSessions(config, log)
