"""``langorch approvals list | show | reissue``: parked human decisions and their audit trail.

What is shown is what an operator needs — what is asked, who may decide, how it ended and the
audit trail — never the task token or an approval link: a link decides for whoever holds it.
"""

from __future__ import annotations

import argparse
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from langorch.cli.context import Context
from langorch.cli.output import table, terminal_width
from langorch.cli.registry import Subparsers, add_command, add_group, bounded_int
from langorch.domain.errors import NotFoundError

if TYPE_CHECKING:
    from langorch.app.approvals.ports import ApprovalsStore
    from langorch.domain.approvals.policy import Vote
    from langorch.domain.approvals.record import Approval, AuditEntry

_WIDE_COLUMNS = [
    ("approval_id", "ID"),
    ("status", "STATUS"),
    ("workflow_id", "WORKFLOW"),
    ("run_id", "RUN"),
    ("step_id", "STEP"),
    ("title", "TITLE"),
    ("approvers", "APPROVERS"),
    ("created_at", "CREATED"),
    ("expires_at", "EXPIRES"),
    ("decided_by", "DECIDED BY"),
]
"""``--wide``: every field, whole."""

_LIST_COLUMNS = [
    ("approval_id", "ID"),
    ("status", "STATUS"),
    ("workflow_id", "WORKFLOW"),
    ("step_id", "STEP"),
    ("title", "TITLE"),
    ("approvers", "APPROVERS"),
    ("expires", "EXPIRES (UTC)"),
    ("decided_by", "DECIDED BY"),
]
"""The default: what tells approvals apart, fitted to the terminal (ids stay whole)."""

_SHRINK = ("workflow_id", "step_id", "title", "approvers", "decided_by")

_AUDIT_COLUMNS = [
    ("at", "AT"),
    ("action", "ACTION"),
    ("outcome", "OUTCOME"),
    ("actor", "WHO"),
    ("method", "METHOD"),
    ("source_ip", "FROM"),
    ("reason", "REASON"),
]


def register(subparsers: Subparsers) -> None:
    """Add the ``approvals`` group."""
    approvals = add_group(subparsers, "approvals", "inspect approvals and their audit trail")

    listing = add_command(approvals, "list", _list, "approvals, newest first")
    listing.add_argument("--pending", action="store_true", help="only those waiting for a decision")
    listing.add_argument("--run", metavar="RUN_ID", help="only this run's approvals")
    listing.add_argument(
        "--limit", type=bounded_int(1, 1000), default=50, help="at most this many (default 50)"
    )
    listing.add_argument(
        "--wide", action="store_true", help="every column, nothing cut to the terminal's width"
    )

    stats = add_command(
        approvals,
        "stats",
        _stats,
        "how approvals are decided: time to decide, rubber-stamp signals (decided without "
        "opening the evidence, or within --within seconds of it), approve rate per approver "
        "and per policy",
    )
    stats.add_argument("--since", metavar="DATE", help="only approvals asked since (ISO date)")
    stats.add_argument(
        "--within",
        type=float,
        default=10.0,
        metavar="SECONDS",
        help="a decision this soon after first viewing the evidence is a rubber stamp (10)",
    )
    stats.add_argument(
        "--limit", type=bounded_int(1, 1000), default=1000, help="the newest this many (1000)"
    )

    show = add_command(approvals, "show", _show, "what is asked, who may decide, how it ended")
    show.add_argument("approval_id", metavar="ID")

    reissue = add_command(
        approvals,
        "reissue",
        _reissue,
        "email every approver a fresh link and code; the links sent before stop working",
    )
    reissue.add_argument("approval_id", metavar="ID")


def _repository(ctx: Context) -> ApprovalsStore:
    return ctx.container.approvals


def summary(approval: Approval) -> dict[str, Any]:
    """The fields of a listing row (JSON-ready)."""
    return {
        "approval_id": approval.approval_id,
        "status": approval.status.value,
        "workflow_id": approval.workflow_id,
        "run_id": approval.run_id,
        "step_id": approval.step_id,
        "title": approval.title,
        "approvers": list(approval.approvers),
        "created_at": approval.created_at.isoformat(),
        "expires_at": approval.expires_at.isoformat(),
        "decided_by": approval.decided_by,
        "decided_at": approval.decided_at.isoformat() if approval.decided_at else None,
    }


def detail(approval: Approval, audit: list[AuditEntry]) -> dict[str, Any]:
    """Everything ``show`` prints, built field by field: nothing secret can slip in."""
    return {
        **summary(approval),
        "iteration": approval.iteration,
        "max_iterations": approval.max_iterations,
        "message": approval.message,
        "context": approval.context,
        "editable": approval.editable,
        "require_code": approval.require_code,
        "on_timeout": approval.on_timeout,
        "comment": approval.comment,
        "edits": approval.edits,
        "audit": [
            {
                "at": entry.at.isoformat(),
                "action": entry.action,
                "outcome": entry.outcome,
                "actor": entry.actor,
                "method": entry.method,
                "source_ip": entry.source_ip,
                "user_agent": entry.user_agent,
                "reason": entry.reason,
            }
            for entry in audit
        ],
    }


def _list(ctx: Context, args: argparse.Namespace) -> None:
    found = _repository(ctx).list(pending_only=args.pending, run_id=args.run, limit=args.limit)
    rows = [summary(a) for a in found]

    def text() -> str:
        if args.wide:
            return table(rows, _WIDE_COLUMNS)
        short = [{**row, "expires": row["expires_at"][:16].replace("T", " ")} for row in rows]
        return table(short, _LIST_COLUMNS, max_width=terminal_width(), shrink=_SHRINK)

    ctx.out.result({"approvals": rows}, text)


def _stats(ctx: Context, args: argparse.Namespace) -> None:
    from langorch.app.approvals.quality import approval_quality

    since = datetime.fromisoformat(args.since).replace(tzinfo=UTC) if args.since else None
    report = approval_quality(_repository(ctx), since=since, within=args.within, limit=args.limit)
    ctx.out.result(report, lambda: _stats_text(report))


def _stats_text(report: dict[str, Any]) -> str:
    def pct(value: float | None) -> str:
        return "-" if value is None else f"{value:.0%}"

    lines = [
        f"decided              {report['decided']}",
        f"median to decide     {report['median_seconds_to_decide'] or '-'} s",
        f"approve rate         {pct(report['approve_rate'])}",
        f"rubber stamps        {pct(report['rubber_stamp_rate'])}  (decided unopened, or within "
        f"{report['within_seconds']:g} s of opening; unopened: {report['unopened']})",
    ]
    for group, title in (("by_approver", "APPROVER"), ("by_policy", "POLICY")):
        rows = [
            {
                "name": name,
                "decided": str(figures["decided"]),
                "approved": pct(figures["approve_rate"]),
                "stamps": pct(figures["rubber_stamp_rate"]),
            }
            for name, figures in report[group].items()
        ]
        if rows:
            columns = [
                ("name", title),
                ("decided", "DECIDED"),
                ("approved", "APPROVED"),
                ("stamps", "RUBBER STAMPS"),
            ]
            lines += ["", table(rows, columns)]
    return "\n".join(lines)


def _show(ctx: Context, args: argparse.Namespace) -> None:
    repository = _repository(ctx)
    approval = repository.get(args.approval_id)
    if approval is None:
        raise NotFoundError(
            f"approval {args.approval_id} does not exist (list them with `langorch approvals list`)"
        )
    document = detail(approval, repository.audit(args.approval_id))
    if approval.policy is not None:
        votes = (
            approval.votes if not approval.is_pending else repository.votes(approval.approval_id)
        )
        document["policy"] = policy_detail(approval, votes, now=datetime.now(UTC))
    ctx.out.result(document, lambda: _text(document))


def policy_detail(approval: Approval, votes: list[Vote], *, now: datetime) -> dict[str, Any]:
    """The policy, its votes, and what happens next and when (issue 13)."""
    from langorch.app.approvals.votes import next_step_text
    from langorch.web.pages import policy_lines

    return {
        "rules": policy_lines(approval),
        "votes": [
            {
                "approver": v.approver,
                "decision": v.decision,
                "at": v.at.isoformat(),
                "on_behalf_of": v.on_behalf_of,
                "comment": v.comment,
            }
            for v in votes
        ],
        "delegations": dict(approval.delegations),
        "escalation_level": approval.escalation_level,
        "reminders_sent": approval.reminders_sent,
        **next_step_text(approval.model_copy(update={"votes": votes}), votes, now),
    }


def _reissue(ctx: Context, args: argparse.Namespace) -> None:
    from langorch.app.approvals.requests import reissue_approval

    done = reissue_approval(args.approval_id, ctx.container)
    # Only who was emailed: a link decides for whoever holds it, so none is printed here.
    document = {"approval_id": done.approval_id, "emailed": done.emailed}
    ctx.out.result(
        document,
        lambda: (
            f"new links and codes sent for {done.approval_id} to {', '.join(done.emailed)}; "
            "the links sent before no longer work"
        ),
    )


def _text(document: dict[str, Any]) -> str:
    import json

    def value(item: Any) -> str:
        text = item if isinstance(item, str) else json.dumps(item, default=str)
        return text if len(text) <= 200 else text[:199] + "…"

    lines = [
        f"approval   {document['approval_id']}  ({document['status']})",
        f"title      {document['title']}",
    ]
    if document["message"]:
        lines.append(f"message    {document['message']}")
    lines += [
        f"run        {document['run_id']}  workflow {document['workflow_id'] or '-'}  "
        f"step {document['step_id']}  round {document['iteration']}"
        + (f"/{document['max_iterations']}" if document["max_iterations"] else ""),
        f"approvers  {', '.join(document['approvers']) or '-'}"
        + ("  (one-time code required)" if document["require_code"] else ""),
        f"created    {document['created_at']}",
        f"expires    {document['expires_at']}"
        + (f"  (then: {document['on_timeout']})" if document["on_timeout"] else ""),
    ]
    if document["decided_by"] or document["decided_at"]:
        lines.append(
            f"decided    {document['status']} by {document['decided_by'] or '-'} "
            f"at {document['decided_at'] or '-'}"
        )
    if document["comment"]:
        lines.append(f"comment    {value(document['comment'])}")
    for title, mapping in (
        ("context", document["context"]),
        ("editable", document["editable"]),
        ("edits", document["edits"]),
    ):
        if mapping:
            lines.append(f"{title}:")
            lines += [f"  {key}: {value(item)}" for key, item in mapping.items()]
    if document.get("policy"):
        lines += _policy_text(document["policy"], document["status"])
    lines += ["", "audit trail:", table(document["audit"], _AUDIT_COLUMNS)]
    return "\n".join(lines)


def _policy_text(policy: dict[str, Any], status: str) -> list[str]:
    lines = ["", "policy:"] + [f"  {rule}" for rule in policy["rules"]]
    lines.append(f"progress   {policy['progress']}")
    for vote in policy["votes"]:
        behalf = f" (for {vote['on_behalf_of']})" if vote["on_behalf_of"] else ""
        lines.append(f"  vote     {vote['decision']} by {vote['approver']}{behalf} at {vote['at']}")
    for delegate, delegator in policy["delegations"].items():
        lines.append(f"  handed   {delegator} -> {delegate}")
    if status == "pending":
        upcoming = policy["next"]
        if upcoming:
            lines.append(f"next       {upcoming['kind']} at {upcoming['at']}: {upcoming['why']}")
        timeout = policy["on_timeout"]
        lines.append(f"then       at {timeout['at']} without a decision: {timeout['then']}")
    return lines
