"""How command groups plug into ``langorch``.

A group is a module under :mod:`langorch.cli.commands` with a ``register(subparsers)``
function, listed (name and help) in :data:`langorch.cli.commands.GROUPS`; a command line imports
only the groups it names. It adds its commands with
:func:`add_group` and :func:`add_command`::

    def register(subparsers: Subparsers) -> None:
        runs = add_group(subparsers, "runs", "start and inspect runs")
        start = add_command(runs, "start", _start, "start a run of a workflow")
        start.add_argument("workflow")

    def _start(ctx: Context, args: argparse.Namespace) -> int | None:
        ...  # use ctx.client(...), ctx.settings, ctx.out.result(data, text)

Handlers return an exit code (``None`` means 0) and raise ``LangorchError`` subclasses for
failures; :mod:`langorch.cli.errors` turns those into exit codes and one-line reasons.
Keep heavy imports (LangGraph, LLM SDKs) inside handlers so ``langorch --help`` stays fast.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeAlias

if TYPE_CHECKING:
    from langorch.cli.context import Context

Handler: TypeAlias = "Callable[[Context, argparse.Namespace], int | None]"
Subparsers: TypeAlias = "argparse._SubParsersAction[argparse.ArgumentParser]"


def add_common_options(parser: argparse.ArgumentParser, *, top_level: bool) -> None:
    """The options every command takes, before or after the command name.

    On subcommands the defaults are suppressed, so ``langorch --json blocks list`` is not
    undone by the subcommand's own default.
    """

    def default(value: Any) -> Any:
        return value if top_level else argparse.SUPPRESS

    parser.add_argument(
        "--json", action="store_true", default=default(False), help="machine-readable output"
    )
    parser.add_argument(
        "--endpoint-url",
        default=default(None),
        metavar="URL",
        help="AWS-compatible endpoint (default: LANGORCH_ENDPOINT_URL, else the local stack)",
    )
    parser.add_argument(
        "--stack",
        default=default(None),
        metavar="NAME",
        help="a deployed stack (resources from its CloudFormation outputs)",
    )
    parser.add_argument(
        "--region", default=default(None), help="AWS region (default: LANGORCH_REGION)"
    )
    parser.add_argument(
        "--home",
        default=default(None),
        metavar="DIR",
        help="the local stack's folder: its stack file, state and outbox "
        "(default: LANGORCH_HOME, else ./.langorch)",
    )
    parser.add_argument(
        "--debug",
        action="store_true",
        default=default(False),
        help="show the traceback of unexpected errors",
    )


def bounded_int(low: int, high: int) -> Callable[[str], int]:
    """An argparse ``type`` for a whole number in ``[low, high]``.

    A value outside is a usage error naming the range (exit 2), instead of being accepted and
    failing later with an internal message or silently meaning something else.
    """

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
        if not low <= value <= high:
            raise argparse.ArgumentTypeError(f"must be between {low} and {high}, not {value}")
        return value

    return parse


def positive_float(text: str) -> float:
    """An argparse ``type`` for a number of seconds greater than zero."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be more than 0 seconds, not {text}")
    return value


def add_group(subparsers: Subparsers, name: str, help_text: str) -> Subparsers:
    """Add a command group (``langorch <name> …``) and return its subcommand collection."""
    group = subparsers.add_parser(name, help=help_text, description=help_text)
    commands = group.add_subparsers(dest="command", metavar="COMMAND", required=True)
    return commands


def add_command(
    group: Subparsers, name: str, handler: Handler, help_text: str
) -> argparse.ArgumentParser:
    """Add a command to a group; the returned parser takes its own arguments."""
    parser = group.add_parser(name, help=help_text, description=help_text)
    add_common_options(parser, top_level=False)
    parser.set_defaults(handler=handler)
    return parser
