"""``langorch``: the command line. Builds the parser from the command groups and runs one.

Exit codes and one-line error reasons come from :mod:`langorch.cli.errors`.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence

from langorch import __version__
from langorch.cli.commands import GROUPS
from langorch.cli.context import Context
from langorch.cli.errors import EXIT_BROKEN_PIPE, EXIT_FAILURE, EXIT_OK, one_line, report
from langorch.cli.output import Output
from langorch.cli.registry import add_common_options
from langorch.domain.errors import LangorchError


def build_parser(argv: Sequence[str] | None = None) -> argparse.ArgumentParser:
    """The ``langorch`` parser.

    Args:
        argv: the command line it will parse: only the groups named in it are loaded, the others
            are listed by name and help (a command starts in a fraction of the time it takes to
            import every group). ``None``: every group, loaded.
    """
    parser = argparse.ArgumentParser(
        prog="langorch",
        description="Run AI workflows on AWS: register blocks and workflows, start and "
        "inspect runs, decide approvals.",
    )
    parser.add_argument("--version", action="version", version=f"langorch {__version__}")
    add_common_options(parser, top_level=True)
    groups = parser.add_subparsers(dest="group", metavar="GROUP", required=True)
    named = None if argv is None else set(argv)
    for group in GROUPS:
        if named is None or group.name in named:
            group.load().register(groups)
        else:  # never parsed: a command line that reaches it names it, and loads it above
            groups.add_parser(group.name, help=group.help, description=group.help)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run one ``langorch`` command.

    Args:
        argv: the arguments after the program name (default: ``sys.argv[1:]``).

    Returns:
        The exit code: 0 on success, see :mod:`langorch.cli.errors` otherwise.
    """
    try:
        code = _run(argv)
        # Flushed here, not at interpreter exit, so a reader that went away is seen below.
        sys.stdout.flush()
    except BrokenPipeError:
        return _reader_went_away()
    return code


def _run(argv: Sequence[str] | None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    parser = build_parser(argv)
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:
        # argparse exits on --help, --version and usage errors; tests call main() directly.
        return exc.code if isinstance(exc.code, int) else EXIT_FAILURE
    out = Output(json_mode=args.json)
    ctx = Context(args, out)
    try:
        code = args.handler(ctx, args)
    except LangorchError as exc:
        return report(exc, out)
    except KeyboardInterrupt:
        out.error("interrupted")
        return 130
    except BrokenPipeError:
        raise
    except Exception as exc:
        if args.debug:
            raise
        out.error(f"unexpected {type(exc).__name__}: {one_line(exc)} (rerun with --debug)")
        return EXIT_FAILURE
    return EXIT_OK if code is None else int(code)


def _reader_went_away() -> int:
    """``langorch … | head``: the reader closed the pipe. Stop quietly.

    The Python documentation's recipe (``signal``, "Note on SIGPIPE"): point stdout at devnull
    so the interpreter's own flush at exit does not fail a second time and print a traceback.
    """
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError, AttributeError):
        pass  # stdout is not a real file (a test's capture): nothing will flush to the pipe
    return EXIT_BROKEN_PIPE


if __name__ == "__main__":
    sys.exit(main())
