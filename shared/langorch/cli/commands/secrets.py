"""``langorch secrets put | list | delete``: the secrets a deployment's functions read.

Tool credentials (``tools add --header H=secret:ID``), LLM keys and webhook secrets live in
the target's secrets store: Secrets Manager in the cloud, the home's store locally. A value is
read from the command's standard input (``--value -``, the default) so it never lands in the
shell's history, or given as ``--value TEXT``; it is stored as ``{"value": TEXT}``, the shape
``tools`` headers read, or as the JSON object ``--object`` gives. Values are never printed.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from langorch.cli.context import Context
from langorch.cli.errors import UsageError
from langorch.cli.registry import Subparsers, add_command, add_group


def register(subparsers: Subparsers) -> None:
    """Add the ``secrets`` group."""
    group = add_group(subparsers, "secrets", "store secrets the functions read (never shown)")
    put = add_command(group, "put", _put, "create or replace a secret")
    put.add_argument("name", metavar="NAME", help="e.g. langorch/tools/orders")
    given = put.add_mutually_exclusive_group()
    given.add_argument(
        "--value",
        default="-",
        metavar="TEXT",
        help='stored as {"value": TEXT}; "-" (the default) reads it from standard input',
    )
    given.add_argument("--object", dest="json_value", metavar="JSON", help="a JSON object")
    put.add_argument("--description", default="", help="what it is for")
    add_command(group, "exists", _exists, "whether a secret exists").add_argument("name")
    add_command(group, "delete", _delete, "delete a secret").add_argument("name")


def _value(args: argparse.Namespace) -> dict[str, Any]:
    if args.json_value is not None:
        try:
            value = json.loads(args.json_value)
        except ValueError as exc:
            raise UsageError(f"--object: not JSON ({exc}); give a JSON object") from None
        if not isinstance(value, dict):
            raise UsageError('--object: give a JSON object, e.g. \'{"api_key": "..."}\'')
        return value
    text = sys.stdin.read() if args.value == "-" else args.value
    text = text.rstrip("\n")
    if not text:
        raise UsageError("the secret's value is empty: pipe it in, or give --value TEXT")
    return {"value": text}


def _put(ctx: Context, args: argparse.Namespace) -> None:
    created = ctx.container.secrets.put_json(args.name, _value(args), description=args.description)
    ctx.out.result(
        {"name": args.name, "created": created},
        f"secret {args.name} {'created' if created else 'replaced'} (its value is not shown)",
    )


def _exists(ctx: Context, args: argparse.Namespace) -> int:
    found = ctx.container.secrets.exists(args.name)
    ctx.out.result({"name": args.name, "exists": found}, "yes" if found else "no")
    return 0 if found else 1


def _delete(ctx: Context, args: argparse.Namespace) -> None:
    secrets: Any = ctx.container.secrets
    secrets.delete(args.name)
    ctx.out.result({"name": args.name, "deleted": True}, f"secret {args.name} deleted")
