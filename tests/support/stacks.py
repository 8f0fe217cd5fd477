"""`langorch dev` started by a test: in this process (``running_stack``) on free loopback ports,
with the repository's examples or the test's own workflows registered."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path

from langorch.local.stack import LocalStack, free_port, start_local_stack

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "examples"
START_BLOG_REVIEW = (
    "runs",
    "start",
    "blog_review",
    "--input",
    '{"commit_message": "Add S3 offload"}',
)
"""The command line that starts the blog review example (add ``--wait`` or ``--approve``)."""


@contextlib.contextmanager
def running_stack(
    home: Path, *, examples: Path | None = None, definitions: str | None = None
) -> Iterator[LocalStack]:
    """`langorch dev` in this process on a free port, stopped on exit.

    Args:
        home: The stack's home (created).
        examples: The examples folder to register, if any.
        definitions: Workflows (YAML) to register with their triggers synced, as
            ``langorch workflows put`` does, once the stack is up.
    """
    from langorch.app.trigger_sync import register_and_sync
    from langorch.composition.bootstrap import build_container

    stack = start_local_stack(home=home, port=free_port(), examples=examples)
    try:
        if definitions is not None:
            path = home / "definitions.yaml"
            path.write_text(definitions)
            register_and_sync([path], build_container(stack.settings))
        yield stack
    finally:
        stack.stop()
