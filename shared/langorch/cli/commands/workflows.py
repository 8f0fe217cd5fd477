"""``langorch workflows put | validate | new | draft | list | show | promote | history |
rotate-secret``."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING, Any

from langorch.cli.commands._definitions import (
    add_strict,
    problem_documents,
    put_document,
    put_text,
    require_webhook,
    show,
    warn_each,
    workflow_row,
)
from langorch.cli.context import Context
from langorch.cli.errors import UsageError
from langorch.cli.output import table, to_yaml
from langorch.cli.registry import Subparsers, add_command, add_group
from langorch.domain.workflow_templates import TEMPLATES

if TYPE_CHECKING:
    from langorch.app.trigger_sync import TriggerSync


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
    put.add_argument(
        "--draft",
        action="store_true",
        help="store new workflow versions without activating them: runs, triggers and "
        "schedules keep starting the active version until `workflows promote`",
    )
    add_strict(put)

    validate = add_command(
        workflows,
        "validate",
        _validate,
        "check files without storing anything (offline when no stack is running)",
    )
    validate.add_argument("files", nargs="+", metavar="FILE")
    add_strict(validate)

    draft = add_command(
        workflows,
        "draft",
        _draft,
        "compose a workflow from an intent with the configured model (offline: from the words "
        "of the blocks); prints it with its warnings, stores nothing",
    )
    draft.add_argument("--intent", required=True, help="what the workflow should do")
    draft.add_argument(
        "files",
        nargs="*",
        metavar="FILE",
        help="more blocks to compose from (besides the built-in and stored ones)",
    )

    add_command(workflows, "list", _list, "every workflow: its latest and its active version")

    promote = add_command(
        workflows,
        "promote",
        _promote,
        "make a stored version the active one (what runs, triggers and schedules start), "
        "recording who, when and the replay gate's result",
    )
    promote.add_argument("workflow", metavar="ID")
    promote.add_argument("--version", type=int, required=True, metavar="N")
    promote.add_argument(
        "--gate",
        metavar="FILE",
        help="the report of `langorch replay --out FILE` on this version: a failed verdict "
        "refuses the promotion",
    )
    promote.add_argument(
        "--force",
        action="store_true",
        help="promote although the gate failed (recorded as forced)",
    )

    history = add_command(
        workflows, "history", _history, "a workflow's versions and promotions, oldest first"
    )
    history.add_argument("workflow", metavar="ID")

    new = add_command(
        workflows,
        "new",
        _new,
        "write a definition file from a built-in template, to edit and then put",
    )
    new.add_argument(
        "--template",
        required=True,
        choices=list(TEMPLATES),
        help="; ".join(f"{name}: {what}" for name, what in TEMPLATES.items()),
    )
    new.add_argument("file", nargs="?", metavar="FILE", help="where to write (default: ID.yaml)")
    new.add_argument("--id", metavar="ID", help="the workflow's id (default: the template's name)")
    new.add_argument("--force", action="store_true", help="overwrite FILE if it exists")

    show_workflow = add_command(workflows, "show", _show, "one stored workflow version")
    show_workflow.add_argument("ref", metavar="ID[@VERSION]")

    export = add_command(
        workflows,
        "export",
        _export,
        "write a stored workflow as a definitions file, or as a CKP procedure (--ckp); "
        "`workflows put` takes either back",
    )
    export.add_argument("ref", metavar="ID[@VERSION]")
    export.add_argument("--ckp", action="store_true", help="as a CKP procedure (seed 001's format)")
    export.add_argument(
        "--output", "-o", metavar="FILE", help="write to FILE (default: standard output)"
    )

    rotate = add_command(
        workflows,
        "rotate-secret",
        _rotate_secret,
        "give a workflow's webhook a new secret (the old one keeps working until the next "
        "rotation); prints it once",
    )
    rotate.add_argument("workflow", metavar="ID")


def _put(ctx: Context, args: argparse.Namespace) -> None:
    from langorch.app.trigger_sync import register_and_sync

    batch = register_and_sync(args.files, ctx.container, strict=args.strict, draft=args.draft)
    results = batch.results
    document = put_document(results)
    document["draft"] = args.draft
    document["triggers"] = [_sync_document(s) for s in batch.triggers]
    document["warnings"] = problem_documents(batch.warnings)
    warn_each(ctx, batch.warnings)
    for sync in batch.triggers:
        for warning in sync.warnings:
            ctx.out.warn(warning)
    if ctx.settings.local_home is None:  # the local bus matches every event trigger
        rules = _event_rule_warnings(args.files)
        document["warnings"] += [{"path": "triggers", "message": w} for w in rules]
        for warning in rules:
            ctx.out.warn(warning)
    ctx.out.result(
        document,
        lambda: "\n".join(
            [
                put_text(results),
                *_draft_lines(ctx, results, args.draft),
                *_sync_lines(batch.triggers),
            ]
        ).rstrip(),
    )


def _draft_lines(ctx: Context, results: list[Any], draft: bool) -> list[str]:
    """How to promote each workflow version the put left inactive."""
    lines = []
    for result in results:
        if result.kind != "workflow":
            continue
        active = ctx.definitions().get_workflow(result.id)
        if active is not None and active.version == result.version:
            continue
        running = "nothing (no active version)" if active is None else f"version {active.version}"
        lines.append(
            f"workflow {result.id}: version {result.version} is a draft; runs start {running}. "
            f"Promote it: langorch workflows promote {result.id} --version {result.version}"
            + ("" if not draft else " [--gate replay.json]")
        )
    return lines


def _event_rule_warnings(files: list[str]) -> list[str]:
    """Workflows put with an event trigger whose file ``cdk.json``'s ``event_workflows`` (in
    the current folder) does not list: the stack has no rule for them."""
    import json

    from langorch.app.event_rules import unruled_event_triggers
    from langorch.domain.loading import load_file

    plans = [(Path(f), plan) for f in files for plan in load_file(Path(f)).workflows]
    cdk = Path.cwd() / "cdk.json"
    listed: list[str] | None = None
    if cdk.is_file():
        context = json.loads(cdk.read_text()).get("context", {}).get("langorch", {})
        value = context.get("event_workflows", [])
        listed = (
            [v.strip() for v in value.split(",") if v.strip()]
            if isinstance(value, str)
            else [str(v) for v in value]
        )
    return unruled_event_triggers(plans, listed, Path.cwd())


def _sync_document(sync: TriggerSync) -> dict[str, Any]:
    """A workflow's trigger sync as JSON; ``webhook_secret`` only when it was just created."""
    document: dict[str, Any] = {
        "workflow_id": sync.workflow_id,
        "secret_name": sync.secret_name,
        "schedules": [
            {
                "name": c.name,
                "action": c.action,
                "expression": c.expression,
                "timezone": c.timezone,
            }
            for c in sync.schedules
        ],
    }
    if sync.webhook_secret is not None:
        document["webhook_secret"] = sync.webhook_secret
    return document


def _sync_lines(syncs: list[TriggerSync]) -> list[str]:
    lines = []
    for sync in syncs:
        for change in sync.schedules:
            when = f" {change.expression} {change.timezone}" if change.expression else ""
            lines.append(f"schedule {change.name}: {change.action}{when}")
        if sync.webhook_secret is not None:
            lines.append(
                f"webhook secret for {sync.workflow_id} (shown once): {sync.webhook_secret}"
            )
    return lines


def _rotate_secret(ctx: Context, args: argparse.Namespace) -> None:
    from langorch.app.trigger_sync import rotate_webhook_secret

    require_webhook(ctx, args.workflow)  # says what is wrong and how to fix it
    secret = rotate_webhook_secret(args.workflow, ctx.container)
    ctx.out.result(
        {"workflow_id": args.workflow, "webhook_secret": secret},
        f"new webhook secret for {args.workflow} (shown once): {secret}\n"
        "the previous secret keeps verifying until the next rotation",
    )


def _known_tools(ctx: Context, target: Any) -> frozenset[str]:
    """Built-in tools, plus the target's registered ones when a stack is reachable."""
    if target is None:
        # The built-in names only: the registry's module builds its models (issue 26).
        from langorch.llm.names import KNOWN_TOOLS

        return frozenset(KNOWN_TOOLS)
    from langorch.app.tool_registry import known_tool_names

    return known_tool_names(ctx.container.tool_servers)


def _validate(ctx: Context, args: argparse.Namespace) -> None:
    from langorch.app.definitions import validate_files

    target = ctx.reachable_target()
    lookup = None if target is None else ctx.definitions()
    against = "built-in blocks only" if target is None else f"stored definitions ({target.source})"
    agents = [] if target is None else ctx.container.agents.list()
    batch = validate_files(
        args.files, lookup, tools=_known_tools(ctx, target), strict=args.strict, agents=agents
    )
    warn_each(ctx, batch.warnings)
    document = {
        "valid": True,
        "checked_against": against,
        "blocks": [b.block_id for b in batch.blocks],
        "workflows": [w.plan_id for w in batch.workflows],
        "warnings": problem_documents(batch.warnings),
    }
    warned = f" ({len(batch.warnings)} warning(s) above)" if batch.warnings else ""
    text = (
        f"valid{warned}: {len(batch.blocks)} block(s), {len(batch.workflows)} workflow(s), "
        f"checked against {against}"
    )
    ctx.out.result(document, text)


def _new(ctx: Context, args: argparse.Namespace) -> None:
    """Write a template's definition file; nothing is stored (``workflows put`` does that)."""
    import re

    from langorch.domain.definitions import IDENTIFIER
    from langorch.domain.workflow_templates import default_id, template_text

    workflow_id = args.id or default_id(args.template)
    if not re.match(IDENTIFIER, workflow_id):
        raise UsageError(
            f"--id {workflow_id!r} is not an id: start with a letter, then letters, digits, "
            "_ or - (at most 128)"
        )
    path = Path(args.file or f"{workflow_id}.yaml")
    if path.exists() and not args.force:
        raise UsageError(f"{path} exists; choose another FILE, or --force to overwrite it")
    path.write_text(template_text(args.template, workflow_id), encoding="utf-8")
    ctx.out.result(
        {"file": str(path), "template": args.template, "workflow_id": workflow_id},
        f"wrote {path}: workflow {workflow_id} from template {args.template}\n"
        f"edit it, then: langorch workflows validate {path} && langorch workflows put {path}",
    )


def _draft(ctx: Context, args: argparse.Namespace) -> None:
    from langorch.app.drafting import draft_workflow
    from langorch.composition.container import Container
    from langorch.config import Settings
    from langorch.domain.builtins import builtin_blocks
    from langorch.domain.errors import DefinitionError
    from langorch.domain.loading import load_file
    from langorch.domain.lookup import InMemoryLookup

    intent = " ".join(args.intent.split())
    if not intent:
        raise UsageError("--intent is empty: say what the workflow should do")
    target = ctx.reachable_target()
    blocks = {b.block_id: b for b in builtin_blocks()}
    if target is not None:
        blocks.update((b.block_id, b) for b in ctx.definitions().list_blocks())
    for path in args.files:
        blocks.update((b.block_id, b) for b in load_file(path).blocks)
    # The model is the user's (LANGORCH_DEFAULT_LLM_PROVIDER, its key), as for runs start --local.
    settings = Settings()
    draft = draft_workflow(
        intent,
        list(blocks.values()),
        InMemoryLookup(blocks.values()),
        llm=Container(settings).llm,
        provider=settings.default_llm_provider,
        model=settings.default_llm_model,
        tools=_known_tools(ctx, target),
    )
    body = draft.plan.model_dump(mode="json", exclude_defaults=True)
    warn_each(ctx, draft.warnings)
    document = {
        "workflow": body,
        "composed_by": draft.composed_by,
        "picks": [
            {"step_id": p.step_id, "block_id": p.block_id, "matched": list(p.matched)}
            for p in draft.picks
        ],
        "warnings": problem_documents(draft.warnings),
        "errors": problem_documents(draft.errors),
    }
    ctx.out.result(document, lambda: _draft_text(intent, draft.composed_by, draft.picks, body))
    if draft.errors:
        raise DefinitionError(f"drafted workflow {draft.plan.plan_id}", draft.errors)


def _draft_text(intent: str, composed_by: str, picks: Any, body: dict[str, Any]) -> str:
    lines = [f"# drafted by the {composed_by} from: {intent}"]
    lines += [f"# {p.step_id}: matched {', '.join(p.matched)}" for p in picks]
    lines.append("# not stored: review it, save it to a file, then `langorch workflows put FILE`")
    return "\n".join(lines) + "\n" + to_yaml({"workflows": [body]}).rstrip()


def _list(ctx: Context, args: argparse.Namespace) -> None:
    # The stored JSON, not the models: building their schemas would be most of the command.
    rows = [workflow_row(s) for s in ctx.definitions().list_bodies("workflow")]
    columns = [
        ("id", "ID"),
        ("version", "LATEST"),
        ("active_version", "ACTIVE"),
        ("steps", "STEPS"),
        ("triggers", "TRIGGERS"),
        ("name", "NAME"),
    ]
    ctx.out.result({"workflows": rows}, lambda: table(rows, columns))


def _show(ctx: Context, args: argparse.Namespace) -> None:
    show(ctx, "workflow", args.ref)


def _promote(ctx: Context, args: argparse.Namespace) -> None:
    import json

    from langorch.app.promotions import PromoteWorkflow, promote_workflow, sync_for
    from langorch.console.operator import OperatorError, operator_of
    from langorch.domain.promotions import read_gate

    if args.version < 1:
        raise UsageError(f"--version {args.version}: expected a positive integer")
    gate = None
    if args.gate is not None:
        path = Path(args.gate)
        try:
            report = json.loads(path.read_text(encoding="utf-8"))
        except OSError as exc:
            raise UsageError(f"--gate {args.gate}: cannot read it ({exc.strerror})") from exc
        except ValueError as exc:
            raise UsageError(
                f"--gate {args.gate}: not JSON ({exc}); write it with `langorch replay "
                f"--workflow {args.workflow} --candidate-version {args.version} --out {args.gate}`"
            ) from exc
        gate = read_gate(report, source=args.gate, workflow_id=args.workflow, version=args.version)
    try:
        who = operator_of(ctx.container).principal
    except OperatorError as exc:
        raise UsageError(str(exc)) from exc
    cmd = PromoteWorkflow(args.workflow, args.version, who, gate=gate, force=args.force)
    done = promote_workflow(cmd, ctx.container, sync=sync_for(ctx.container))
    if done.promotion is None:
        ctx.out.result(
            {"workflow_id": args.workflow, "version": args.version, "promoted": False},
            f"workflow {args.workflow}: version {args.version} is already active; nothing changed",
        )
        return
    promotion = done.promotion
    document: dict[str, Any] = {"promoted": True, **promotion.to_dict()}
    if done.triggers is not None:
        document["triggers"] = _sync_document(done.triggers)
    ctx.out.result(document, lambda: _promotion_text(promotion, done.triggers))


def _promotion_text(promotion: Any, triggers: TriggerSync | None) -> str:
    before = promotion.previous_version
    was = "none" if before is None else f"version {before}"
    lines = [
        f"workflow {promotion.workflow_id}: version {promotion.version} is active "
        f"(was {was}); promoted by {promotion.promoted_by}"
    ]
    if promotion.gate is not None:
        lines.append(
            promotion.gate.text() + (" — promoted with --force" if promotion.forced else "")
        )
    lines += _sync_lines([] if triggers is None else [triggers])
    return "\n".join(lines)


def _history(ctx: Context, args: argparse.Namespace) -> None:
    from langorch.domain.errors import NotFoundError

    repo = ctx.definitions()
    versions = repo.versions("workflow", args.workflow)
    if not versions:
        raise NotFoundError(
            f"no workflow {args.workflow} is stored in {ctx.target().name}: "
            "`langorch workflows list` shows those that are"
        )
    active = repo.get_stored("workflow", args.workflow)
    promotions = repo.promotions(args.workflow)
    document = {
        "workflow_id": args.workflow,
        "active_version": None if active is None else active.version,
        "versions": [
            {"version": v.version, "content_hash": v.content_hash, "created_at": v.created_at}
            for v in versions
        ],
        "promotions": [p.to_dict() for p in promotions],
    }
    ctx.out.result(document, lambda: _history_text(document, promotions))


def _history_text(document: dict[str, Any], promotions: list[Any]) -> str:
    active = document["active_version"]
    rows = [
        {
            "version": v["version"],
            "state": "active" if v["version"] == active else "",
            "created_at": v["created_at"],
            "content_hash": v["content_hash"][:12],
        }
        for v in document["versions"]
    ]
    columns = [
        ("version", "VERSION"),
        ("state", "STATE"),
        ("created_at", "CREATED"),
        ("content_hash", "HASH"),
    ]
    lines = [table(rows, columns), "", "promotions:" if promotions else "promotions: none"]
    for p in promotions:
        was = "none" if p.previous_version is None else str(p.previous_version)
        gate = "no gate" if p.gate is None else p.gate.text()
        forced = " (forced)" if p.forced else ""
        lines.append(
            f"  {p.promoted_at.isoformat()}  {was} -> {p.version}  by {p.promoted_by}  "
            f"{gate}{forced}"
        )
    return "\n".join(lines)


def _export(ctx: Context, args: argparse.Namespace) -> None:
    import json
    from pathlib import Path

    from langorch.cli.commands._definitions import parse_ref
    from langorch.cli.output import to_yaml
    from langorch.domain.errors import NotFoundError

    workflow_id, version = parse_ref(args.ref)
    repo = ctx.definitions()
    plan = repo.get_workflow(workflow_id, version)
    if plan is None:
        at = f"@{version}" if version else ""
        raise NotFoundError(
            f"no workflow {workflow_id}{at} is stored in {ctx.target().name}: "
            "`langorch workflows list` shows those that are"
        )
    if args.ckp:
        from langorch.domain.ckp.export import export_ckp

        document: dict[str, Any] = export_ckp(plan, repo)
        text = json.dumps(document, indent=2, ensure_ascii=False) + "\n"
    else:
        document = _definitions_file(plan, repo)
        text = to_yaml(document)
    if args.output:
        Path(args.output).write_text(text, encoding="utf-8")
        ctx.out.result(
            {"workflow_id": plan.plan_id, "version": plan.version, "file": args.output},
            f"wrote {plan.plan_id}@{plan.version} to {args.output}"
            + (" (CKP)" if args.ckp else ""),
        )
    else:
        ctx.out.result(document, text.rstrip("\n"))


def _definitions_file(plan: Any, repo: Any) -> dict[str, Any]:
    """The workflow and the blocks it uses, as one definitions file ``workflows put`` takes."""
    blocks: list[dict[str, Any]] = []
    for step in plan.steps:
        if step.block_id is not None:
            block = repo.get_block(step.block_id, step.block_version)
            if block is not None and block.block_id not in {b["block_id"] for b in blocks}:
                blocks.append(block.model_dump(mode="json", exclude_defaults=True))
    workflow = plan.model_dump(mode="json", exclude_defaults=True)
    workflow.pop("version", None)
    return {"blocks": blocks, "workflows": [workflow]} if blocks else {"workflows": [workflow]}
