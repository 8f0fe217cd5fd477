"""The one place langorch errors become exit codes and one-line reasons."""

from __future__ import annotations

from typing import Any

from langorch.cli.output import Output, to_json
from langorch.cli.target import TargetError
from langorch.domain.errors import (
    ConflictError,
    DefinitionError,
    LangorchError,
    NotFoundError,
    StorageError,
)

EXIT_OK = 0
EXIT_FAILURE = 1
"""Any other langorch error."""
EXIT_INVALID = 2
"""Bad command line or bad definition (argparse uses 2 for usage errors too)."""
EXIT_NOT_FOUND = 3
EXIT_NO_TARGET = 4
EXIT_STORAGE = 5
EXIT_CONFLICT = 6
EXIT_BROKEN_PIPE = 141
"""The reader of stdout went away (``langorch runs list | head``). 128 + SIGPIPE, what a
shell reports for ``cat``, ``git`` or ``yes`` in the same place: the command cannot tell a
reader that had enough from one that crashed, so it does not claim success; scripts that
already accept SIGPIPE deaths (``set -o pipefail`` with ``head``) accept this too."""


class UsageError(LangorchError):
    """A command-line argument is malformed (``ID@VERSION`` with a bad version, …)."""


EXIT_CODES: list[tuple[type[LangorchError], int]] = [
    (UsageError, EXIT_INVALID),
    (DefinitionError, EXIT_INVALID),
    (TargetError, EXIT_NO_TARGET),
    (NotFoundError, EXIT_NOT_FOUND),
    (ConflictError, EXIT_CONFLICT),
    (StorageError, EXIT_STORAGE),
]
"""Most specific first; command groups may insert their own errors (``LangorchError``: 1)."""


def exit_code(error: LangorchError) -> int:
    """The exit code for an error."""
    for error_type, code in EXIT_CODES:
        if isinstance(error, error_type):
            return code
    return EXIT_FAILURE


def one_line(error: BaseException) -> str:
    """The first line of an error's message (its type name when it has none)."""
    text = str(error).strip()
    return text.splitlines()[0] if text else type(error).__name__


def report(error: LangorchError, out: Output) -> int:
    """Print an error and return its exit code.

    stderr always gets a one-line reason; a ``DefinitionError`` adds one line per problem
    (text mode) or a ``{"error", "problems": [{"path", "message", "hint"}]}`` document on
    stdout (``--json``).
    """
    reason = one_line(error)
    out.error(reason)
    problems = error.problems if isinstance(error, DefinitionError) else []
    if out.json_mode:
        document: dict[str, Any] = {"error": reason}
        if isinstance(error, DefinitionError):
            document["problems"] = [
                {"path": p.path, "message": p.message, "hint": p.hint} for p in problems
            ]
        print(to_json(document), file=out.stdout)
    else:
        for problem in problems:
            print(f"  {problem}", file=out.stderr)
    return exit_code(error)
