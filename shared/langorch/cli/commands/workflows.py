"""``langorch workflows put | validate | list | show``."""

from __future__ import annotations

import argparse

from langorch.cli.commands._definitions import put_document, put_text, show
from langorch.cli.context import Context
from langorch.cli.output import table
from langorch.cli.registry import Subparsers, add_command, add_group


def register(subparsers: Subparsers) -> None:
    """Add the ``workflows`` group."""
    workflows = add_group(subparsers, "workflows", "register, validate and inspect workflows")

    put = add_command(
        workflows,
        "put",
        _put,
        "validate and store every definition in the files, pinning block versions",
    )
    put.add_argument("files", nargs="+", metavar="FILE")

    validate = add_command(
        workflows,
        "validate",
        _validate,
        "check files without storing anything (offline when no stack is running)",
    )
    validate.add_argument("files", nargs="+", metavar="FILE")

    add_command(workflows, "list", _list, "the latest version of every workflow")

    show_workflow = add_command(workflows, "show", _show, "one stored workflow version")
    show_workflow.add_argument("ref", metavar="ID[@VERSION]")


def _put(ctx: Context, args: argparse.Namespace) -> None:
    from langorch.app.definitions import register_files

    results = register_files(ctx.definitions(), args.files)
    ctx.out.result(put_document(results), lambda: put_text(results))


def _validate(ctx: Context, args: argparse.Namespace) -> None:
    from langorch.app.definitions import validate_files

    target = ctx.reachable_target()
    lookup = None if target is None else ctx.definitions()
    against = "built-in blocks only" if target is None else f"stored definitions ({target.source})"
    batch = validate_files(args.files, lookup)
    document = {
        "valid": True,
        "checked_against": against,
        "blocks": [b.block_id for b in batch.blocks],
        "workflows": [w.plan_id for w in batch.workflows],
    }
    text = (
        f"valid: {len(batch.blocks)} block(s), {len(batch.workflows)} workflow(s), "
        f"checked against {against}"
    )
    ctx.out.result(document, text)


def _list(ctx: Context, args: argparse.Namespace) -> None:
    stored = ctx.definitions().list_stored("workflow")
    rows = [
        {
            "id": s.id,
            "version": s.version,
            "steps": len(s.definition.steps),
            "triggers": [t.type for t in s.definition.all_triggers()],
            "name": s.definition.name,
            "content_hash": s.content_hash,
            "created_at": s.created_at,
        }
        for s in stored
    ]
    columns = [
        ("id", "ID"),
        ("version", "VERSION"),
        ("steps", "STEPS"),
        ("triggers", "TRIGGERS"),
        ("name", "NAME"),
    ]
    ctx.out.result({"workflows": rows}, lambda: table(rows, columns))


def _show(ctx: Context, args: argparse.Namespace) -> None:
    show(ctx, "workflow", args.ref)
