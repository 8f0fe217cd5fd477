"""What ``runs start`` is told: its input, the flags that go together, and approvals answered
from this terminal."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from langorch.cli.context import Context
from langorch.cli.errors import UsageError
from langorch.domain.errors import JsonInputError, JsonShapeError, JsonSyntaxError
from langorch.domain.limits import check_json_shape, loads_strict


def read_input(args: argparse.Namespace) -> dict[str, Any]:
    """The run's input from ``--input`` or ``--input-file`` (``{}`` when neither is given).

    Raises:
        UsageError: the file cannot be read, or the text is not a JSON object, nests deeper than
            ``MAX_JSON_DEPTH`` or is not strict JSON; the message names the flag (and the field
            path or the line and column) and what to pass instead.
    """
    if args.input_file:
        where = f"--input-file {args.input_file}"
        try:
            text = Path(args.input_file).read_text(encoding="utf-8")
        except FileNotFoundError:
            raise UsageError(
                f"{where}: no such file; give the path of a JSON file, "
                'or the JSON itself with --input \'{"key": "value"}\''
            ) from None
        except (OSError, UnicodeDecodeError) as exc:
            reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
            raise UsageError(f"{where}: cannot read it ({reason})") from exc
    else:
        where, text = "--input", "{}" if args.input is None else args.input
    try:
        data = loads_strict(text, where)
    except JsonInputError as exc:
        raise UsageError(str(exc)) from None
    if not isinstance(data, dict):
        raise UsageError(f'{where} must be a JSON object, e.g. {{"key": "value"}}')
    return data


def check_answer_flags(args: argparse.Namespace) -> None:
    """Refuse flags that would be accepted and then ignored (whatever the target)."""
    if args.edit and not args.approve:
        raise UsageError(
            "--edit sets editable keys of an approval this command approves: add --approve "
            "(without it the approvers decide, and edit, on the approval page)"
        )
    if args.comment is not None and not (args.approve or args.reject):
        raise UsageError(
            "--comment goes with the decision of --approve or --reject: add one "
            "(without them the approvers comment on the approval page)"
        )
    if args.script and not args.local:
        raise UsageError(
            "--script is for --local runs: a stack's offline LLM reads the script it was "
            "started with (`langorch dev` prints it on its LLM line)"
        )
    if args.artifacts is not None and not args.local:
        raise UsageError(
            "--artifacts keeps the files of a --local run, whose stores go when it ends: add "
            "--local (a stack keeps its runs' files; `langorch runs show RUN_ID` lists them)"
        )
    if args.timeout is not None and not args.wait:
        raise UsageError("--timeout bounds --wait: add --wait, or leave --timeout out")


def check_launch_flags(args: argparse.Namespace) -> None:
    """On a stack's state machine the run goes on without this process: refuse its knobs."""
    for flag, value in (("--repeat", args.repeat), ("--max-sleep", args.max_sleep)):
        if value is not None:
            raise UsageError(
                f"{flag} applies when this command drives the run (--local, --approve or "
                "--reject); this stack's state machine runs it: leave it out"
            )


def check_driven_flags(args: argparse.Namespace) -> None:
    """This process drives the run to its end: a --wait timeout would be ignored."""
    if args.timeout is not None:
        raise UsageError(
            "--timeout bounds following a run on a stack's state machine; with --local, "
            "--approve or --reject this command drives the run to its end: leave it out"
        )


def parse_edits(pairs: list[str], flag: str = "--edit") -> dict[str, Any]:
    """``--edit KEY=JSON`` (or ``--set``) pairs as a mapping (a bare word is a string).

    Raises:
        UsageError: a pair is not ``KEY=VALUE``, or its value nests deeper than
            ``MAX_JSON_DEPTH`` or is not strict JSON (NaN, Infinity, a lone surrogate).
    """
    edits: dict[str, Any] = {}
    for pair in pairs:
        key, sep, raw = pair.partition("=")
        if not sep or not key:
            raise UsageError(f"{flag} {pair!r}: write KEY=JSON, e.g. restaurant='\"Chipotle\"'")
        edits[key] = edit_value(raw, f"{flag} {key}")
    return edits


def edit_value(raw: str, where: str) -> Any:
    """A typed edit: its JSON value, or the text itself when it is not JSON (a bare word).

    Raises:
        UsageError: the value nests deeper than ``MAX_JSON_DEPTH`` or is not strict JSON;
            the message starts with ``where``.
    """
    try:
        try:
            return loads_strict(raw, where)
        except JsonSyntaxError:
            check_json_shape(raw, where)  # a bare word from argv may hold a surrogate
            return raw
    except JsonShapeError as exc:
        raise UsageError(str(exc)) from None


def say(ctx: Context, message: str) -> None:
    """Tell the person at the terminal (stderr), beside the command's result."""
    # Conversation with the person at the terminal goes to stderr: stdout stays the result.
    print(message, file=ctx.out.stderr)


def answerer(ctx: Context, args: argparse.Namespace) -> Any:
    """The function that answers each approval: ``--approve``/``--reject``, else the prompt."""
    edits = parse_edits(args.edit)

    def answer(request: dict[str, Any]) -> dict[str, Any]:
        title = request.get("title") or request.get("step_id")
        say(ctx, f"approval needed: {title}")
        if request.get("message"):
            say(ctx, f"  {request['message']}")
        previous = request.get("previous")
        if isinstance(previous, dict):
            say(ctx, _previous_round(previous, request.get("iteration")))
        for key, value in (request.get("context") or {}).items():
            say(ctx, f"  {key}: {json.dumps(value, default=str)[:200]}")
        if args.approve or args.reject:
            decision = "approved" if args.approve else "rejected"
            say(ctx, f"  -> {decision} (from the command line)")
            editable = request.get("editable") or {}
            for key in edits.keys() - editable.keys():
                ctx.out.warn(
                    f"--edit {key}: not an editable key of approval {request.get('step_id')} "
                    f"(editable: {', '.join(editable) or 'none'}); not applied there"
                )
            reply: dict[str, Any] = {
                "decision": decision,
                "approver": "cli",
                "comment": args.comment or "",
                "edits": {k: v for k, v in edits.items() if k in editable},
            }
            if request.get("policy"):
                reply.update(_policy_votes(ctx, request, args.approve))
            return reply
        if not sys.stdin.isatty():
            raise UsageError("an approval is waiting: pass --approve or --reject (no terminal)")
        return _prompt(ctx, request)

    return answer


def _policy_votes(ctx: Context, request: dict[str, Any], approve: bool) -> dict[str, Any]:
    """Answer for every approver an approval policy needs (quorum, groups), so one command
    still drives the run: the decision carries their votes, as a decided policy's does."""
    from datetime import UTC, datetime

    from langorch.domain.approvals.votes import votes_answering

    votes = votes_answering(request, "approved" if approve else "rejected", datetime.now(UTC))
    decision = "approved" if approve else "rejected"
    say(ctx, f"  -> {decision} for {', '.join(v.approver for v in votes)} (the policy's quorum)")
    return {
        "approver": votes[-1].approver if votes else "cli",
        "votes": [v.model_dump(mode="json", exclude_none=True) for v in votes],
    }


def _previous_round(previous: dict[str, Any], iteration: Any) -> str:
    """Round 2 on: what the approver asked for last round, and what changed since."""
    who = previous.get("approver") or "the approver"
    comment = str(previous.get("comment") or "")
    asked = f" and asked: {json.dumps(comment)[:300]}" if comment else " without a comment"
    changed = ", ".join(str(k) for k in previous.get("changed") or []) or "nothing shown"
    return (
        f"  round {iteration}: {who} rejected round {previous.get('iteration')}{asked}; "
        f"changed since: {changed}"
    )


def _prompt(ctx: Context, request: dict[str, Any]) -> dict[str, Any]:
    while True:
        choice = input("approve or reject? [a/r] ").strip().lower()
        if choice in ("a", "approve", "r", "reject"):
            break
    decision = "approved" if choice.startswith("a") else "rejected"
    edits: dict[str, Any] = {}
    for key, current in (request.get("editable") or {}).items():
        raw = input(f"  {key} [{json.dumps(current, default=str)}]: ").strip()
        if raw:
            edits[key] = edit_value(raw, key)
    comment = input("  comment (optional): ").strip()
    return {"decision": decision, "approver": "cli", "comment": comment, "edits": edits}
