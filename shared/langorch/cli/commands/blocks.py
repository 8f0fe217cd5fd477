"""``langorch blocks put | list | show``."""

from __future__ import annotations

import argparse

from langorch.cli.commands._definitions import (
    add_strict,
    block_row,
    problem_documents,
    put_document,
    put_text,
    show,
    warn_each,
)
from langorch.cli.context import Context
from langorch.cli.output import table
from langorch.cli.registry import Subparsers, add_command, add_group


def register(subparsers: Subparsers) -> None:
    """Add the ``blocks`` group."""
    blocks = add_group(subparsers, "blocks", "register and inspect blocks")

    put = add_command(
        blocks,
        "put",
        _put,
        "validate the files and store their blocks (new versions for changed content); "
        "workflows in them are left for `workflows put`",
    )
    put.add_argument("files", nargs="+", metavar="FILE")
    add_strict(put)

    listing = add_command(blocks, "list", _list, "the latest version of every block")
    listing.add_argument("--category", help="only blocks in this category")
    listing.add_argument(
        "--tag", action="append", dest="tags", metavar="T", help="only blocks with this tag"
    )

    show_block = add_command(blocks, "show", _show, "one stored block version")
    show_block.add_argument("ref", metavar="ID[@VERSION]")


def _put(ctx: Context, args: argparse.Namespace) -> None:
    from dataclasses import replace

    from langorch.app.definitions import register_block, validate_files

    repo = ctx.definitions()
    # The whole files are checked (a file is one unit), but only their blocks are stored:
    # a workflow stored here would skip its triggers' schedules and webhook secret.
    from langorch.app.tool_registry import known_tool_names

    registered = ctx.container.tool_servers
    tools = known_tool_names(registered)
    batch = validate_files(args.files, repo, tools=tools, strict=args.strict)
    warn_each(ctx, batch.warnings)
    results = [
        replace(register_block(repo, block), source=batch.sources[("block", block.block_id)])
        for block in batch.blocks
        if ("block", block.block_id) in batch.sources  # not the built-ins workflows use
    ]
    skipped = [plan.plan_id for plan in batch.workflows]
    if skipped:
        ctx.out.warn(
            f"not stored: workflow(s) {', '.join(skipped)} (`blocks put` stores blocks only); "
            f"store them with `langorch workflows put {' '.join(args.files)}`"
        )
    document = put_document(results)
    document["skipped_workflows"] = skipped
    document["warnings"] = problem_documents(batch.warnings)
    ctx.out.result(document, lambda: put_text(results) or "no blocks in the files")


def _list(ctx: Context, args: argparse.Namespace) -> None:
    # The stored JSON, not the models: building their schemas would be most of the command.
    stored = ctx.definitions().list_bodies("block", category=args.category, tags=args.tags)
    rows = [block_row(s) for s in stored]
    columns = [
        ("id", "ID"),
        ("version", "VERSION"),
        ("type", "TYPE"),
        ("category", "CATEGORY"),
        ("tags", "TAGS"),
        ("name", "NAME"),
    ]
    ctx.out.result({"blocks": rows}, lambda: table(rows, columns))


def _show(ctx: Context, args: argparse.Namespace) -> None:
    show(ctx, "block", args.ref)
