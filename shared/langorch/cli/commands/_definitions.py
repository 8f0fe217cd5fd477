"""Rendering shared by ``blocks`` and ``workflows``: put results, show, ``ID@VERSION``."""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Any, Literal

from langorch.cli.context import Context
from langorch.cli.errors import UsageError
from langorch.cli.output import to_yaml
from langorch.domain.errors import NotFoundError

if TYPE_CHECKING:
    import argparse

    from langorch.app.definitions import RegisterResult
    from langorch.domain.definitions import TaskPlan
    from langorch.domain.errors import Problem
    from langorch.domain.stored import StoredBody, StoredDefinition

Kind = Literal["block", "workflow"]


def parse_ref(ref: str) -> tuple[str, int | None]:
    """``ID`` or ``ID@VERSION`` -> ``(id, version or None)``.

    Raises:
        UsageError: the version is not a positive integer.
    """
    definition_id, at, version = ref.partition("@")
    if not at:
        return definition_id, None
    if not version.isdigit() or int(version) < 1:
        raise UsageError(f"bad version in {ref!r}: expected ID@N with N a positive integer")
    return definition_id, int(version)


def add_strict(parser: argparse.ArgumentParser) -> None:
    """The ``--strict`` flag of ``put`` and ``validate``."""
    parser.add_argument(
        "--strict",
        action="store_true",
        help="treat warnings (inputs left to the user's preferences, unbound tools, …) as "
        "errors: exit 2 and store nothing",
    )


def warn_each(ctx: Context, warnings: list[Problem]) -> None:
    """Print each warning on its own ``warning:`` line (stderr, apart from the result)."""
    for warning in warnings:
        ctx.out.warn(str(warning))


def problem_documents(problems: list[Problem]) -> list[dict[str, str]]:
    """Problems as ``--json`` (the shape of the error document's ``problems``)."""
    return [{"path": p.path, "message": p.message, "hint": p.hint} for p in problems]


def put_document(results: list[RegisterResult]) -> dict[str, Any]:
    """The ``--json`` output of ``put``."""
    return {
        "results": [
            {
                "kind": r.kind,
                "id": r.id,
                "version": r.version,
                "created": r.created,
                "content_hash": r.content_hash,
                "source": r.source,
            }
            for r in results
        ]
    }


def put_text(results: list[RegisterResult]) -> str:
    """The human output of ``put``: one line per definition."""
    return "\n".join(
        f"{r.kind} {r.id}: version {r.version} "
        f"{'stored' if r.created else 'unchanged (identical content)'}"
        for r in results
    )


def show(ctx: Context, kind: Kind, ref: str) -> None:
    """Print one stored version with its version, hash and creation time.

    Raises:
        NotFoundError: no such definition or version.
    """
    definition_id, version = parse_ref(ref)
    repo = ctx.definitions()
    stored = repo.get_stored(kind, definition_id, version)
    latest = repo.latest_version(kind, definition_id)
    if stored is None:
        if latest is not None and version is not None:
            raise NotFoundError(
                f"{kind} {definition_id} has no version {version} in {ctx.target().name}: "
                f"its versions are 1 to {latest}"
            )
        if latest is not None:  # only drafts are stored
            raise NotFoundError(
                f"workflow {definition_id} has no active version, only drafts (1 to {latest}): "
                f"`langorch {kind}s show {definition_id}@{latest}` shows one, `langorch "
                f"workflows promote {definition_id} --version {latest}` activates it"
            )
        raise NotFoundError(_not_stored(ctx, kind, definition_id))
    if kind == "workflow" and stored.active_version is None:
        active = repo.get_stored(kind, definition_id)
        stored = replace(stored, active_version=None if active is None else active.version)
    document = stored_document(stored)
    document["latest_version"] = latest
    ctx.out.result(document, lambda: _show_text(stored, latest))


def _not_stored(ctx: Context, kind: Kind, definition_id: str) -> str:
    return (
        f"no {kind} {definition_id} is stored in {ctx.target().name}: "
        f"`langorch {kind}s list` shows those that are, "
        f"`langorch {kind}s put FILE` stores one"
    )


def require_workflow(ctx: Context, workflow_id: str) -> TaskPlan:
    """The active version of a workflow.

    Raises:
        NotFoundError: it is not stored, with how to list and store workflows.
    """
    plan = ctx.definitions().get_workflow(workflow_id)
    if plan is None:
        raise NotFoundError(_not_stored(ctx, "workflow", workflow_id))
    return plan


def require_webhook(ctx: Context, workflow_id: str) -> TaskPlan:
    """The active version of a workflow that has a webhook trigger.

    Raises:
        NotFoundError: it is not stored.
        UsageError: it has no webhook trigger, with how to add one or start it otherwise.
    """
    plan = require_workflow(ctx, workflow_id)
    if not any(t.type == "webhook" for t in plan.all_triggers()):
        raise UsageError(
            f"workflow {workflow_id} has no webhook trigger: add `triggers: [{{type: webhook}}]` "
            f"to it and `langorch workflows put` its file again, or start it with "
            f"`langorch runs start {workflow_id}`"
        )
    return plan


def block_row(stored: StoredBody) -> dict[str, Any]:
    """A ``blocks list`` row, read from the stored JSON (a field absent from an older version's
    body reads as ``BlockDefinition``'s default)."""
    body = stored.body
    return {
        "id": stored.id,
        "version": stored.version,
        "type": body.get("block_type", "action"),
        "category": body.get("category", ""),
        "tags": body.get("tags", []),
        "name": body.get("name", ""),
        "content_hash": stored.content_hash,
        "created_at": stored.created_at,
    }


def workflow_row(stored: StoredBody) -> dict[str, Any]:
    """A ``workflows list`` row, read from the stored JSON (as :func:`block_row`)."""
    body = stored.body
    # As TaskPlan.all_triggers(): the seed-000 ``schedule`` shorthand is a schedule trigger
    # unless one is listed.
    triggers = [trigger["type"] for trigger in body.get("triggers", [])]
    if body.get("schedule") is not None and "schedule" not in triggers:
        triggers.append("schedule")
    return {
        "id": stored.id,
        "version": stored.version,
        "active_version": stored.active_version,
        "steps": len(body["steps"]),
        "triggers": triggers,
        "name": body.get("name", ""),
        "content_hash": stored.content_hash,
        "created_at": stored.created_at,
    }


def stored_document(stored: StoredDefinition[Any]) -> dict[str, Any]:
    """A stored version as JSON: metadata plus the full definition."""
    return {
        "kind": stored.kind,
        "id": stored.id,
        "version": stored.version,
        "content_hash": stored.content_hash,
        "created_at": stored.created_at,
        "active_version": stored.active_version,
        "definition": stored.definition.model_dump(mode="json"),
    }


def _show_text(stored: StoredDefinition[Any], latest: int | None = None) -> str:
    header = (
        f"# {stored.kind} {stored.id} version {stored.version}{_state(stored, latest)}\n"
        f"# hash {stored.content_hash}\n"
        f"# created {stored.created_at.isoformat()}\n"
    )
    ckp: str | None = getattr(stored.definition, "ckp", None)
    if ckp is not None:
        # A CKP procedure is shown as its author wrote it (the compiled plan: --json).
        return header + "# a CKP procedure, as written\n" + ckp
    # Defaults left out: the same definition, and what the author wrote rather than every field.
    body = stored.definition.model_dump(mode="json", exclude_defaults=True)
    body["version"] = stored.version
    return header + to_yaml(body).rstrip()


def _state(stored: StoredDefinition[Any], latest: int | None) -> str:
    """`` (active)``, `` (draft; active: 2)`` or `` (active; draft 4 is newer)`` for a
    workflow; nothing for a block (every block version is usable)."""
    if stored.kind != "workflow":
        return ""
    active = stored.active_version
    if active == stored.version:
        newer = f"; draft {latest} is newer" if latest is not None and latest > active else ""
        return f" (active{newer})"
    return f" (draft; active: {'none' if active is None else active})"
