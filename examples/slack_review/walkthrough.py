"""The blog review decided in Slack, offline: `langorch dev`'s stack with its fake Slack.

Run from the repository (README, "Approvals in Slack"):

    python examples/slack_review/walkthrough.py

It starts the local stack in a temporary home with the fake Slack serving on loopback, starts a
``slack_review`` run and, once its request is posted as a DM to each editor, does what Slack
would do when they press buttons: the editor presses Approve (1 of 2 approvals: the message and
its thread say so), then the lead opens "Comment…" and approves in the modal with a comment.
Each press is the request Slack sends, signed with the app's signing secret, posted to the local
gateway's ``POST /slack/interactions``. It prints the message and its thread as Slack shows
them, and the run's end.
"""

from __future__ import annotations

import json
import tempfile
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from langorch.app.runs import StartRun, launch_run
from langorch.domain.approvals.channels import PostedMessage, posted_messages
from langorch.local.fake_slack import (
    signed_form_opening,
    signed_form_submission,
    signed_interaction,
)
from langorch.local.stack import LocalStack, free_port, start_local_stack

HERE = Path(__file__).resolve().parent
EDITOR, LEAD = "editor@example.com", "lead@example.com"
PATIENCE_SECONDS = 180.0
T = TypeVar("T")


def until(found: Callable[[], T | None], what: str) -> T:
    """Poll ``found`` until it answers (the stack works in its own processes)."""
    deadline = time.monotonic() + PATIENCE_SECONDS
    while time.monotonic() < deadline:
        value = found()
        if value:
            return value
        time.sleep(0.2)
    raise SystemExit(f"gave up waiting for {what}")


def post(stack: LocalStack, signed: tuple[bytes, dict[str, str]]) -> int:
    """Send Slack's signed request to the gateway; its status."""
    body, headers = signed
    url = f"{stack.gateway_url}/slack/interactions"
    request = urllib.request.Request(url, data=body, headers=headers, method="POST")  # noqa: S310
    with urllib.request.urlopen(request, timeout=60) as answer:  # noqa: S310 - loopback
        return int(answer.status)


def thread(stack: LocalStack, message: PostedMessage) -> list[str]:
    """What the fake Slack shows in ``message``'s thread."""
    return [
        str(p["text"])
        for p in stack.fake_slack.slack.called("chat.postMessage")
        if p.get("thread_ts") == message.message_id and p.get("channel") == message.conversation
    ]


def shown(stack: LocalStack, message: PostedMessage) -> str:
    """The message's text lines as Slack shows them (header, context lines)."""
    blocks = stack.fake_slack.slack.messages[message.conversation, message.message_id]["blocks"]
    lines = []
    for block in blocks:
        if block["type"] == "header":
            lines.append(block["text"]["text"])
        elif block["type"] == "context":
            lines.append(" ".join(e["text"] for e in block["elements"]))
        elif block["type"] == "actions":
            lines.append(" | ".join(f"[{e['text']['text']}]" for e in block["elements"]))
    return "\n    ".join(lines)


def walk(stack: LocalStack) -> None:
    """The run, the two presses, and what Slack shows."""
    container: Any = stack.container
    run, _ = launch_run(
        StartRun("slack_review", {"commit_message": "Add S3 offload"}, trigger="manual"),
        container,
    )
    print(f"run {run.run_id} started")
    approval = until(
        lambda: next(iter(container.approvals.list(pending_only=True, run_id=run.run_id)), None),
        "the review's approval",
    )
    messages = until(
        lambda: (
            [m for m in posted_messages(container.approvals.audit(approval.approval_id))]
            if len(posted_messages(container.approvals.audit(approval.approval_id))) == 2
            else None
        ),
        "a DM to each editor",
    )
    to = {m.to: m for m in messages}
    users = {email: user for user, email in stack.fake_slack.slack.users.items()}
    secret = container.secrets.get_json(stack.settings.slack_secret)["signing_secret"]
    print(f"posted in Slack to {', '.join(sorted(str(m.to) for m in messages))}")

    # The editor presses Approve on their DM.
    editor = to[EDITOR]
    status = post(
        stack,
        signed_interaction(
            secret,
            user_id=users[EDITOR],
            approval_id=approval.approval_id,
            decision="approved",
            conversation=editor.conversation,
            message_ts=editor.message_id,
            timestamp=int(time.time()),
        ),
    )
    print(f"{EDITOR} pressed Approve: Slack got {status}")
    until(lambda: thread(stack, editor), "the vote in the thread")
    print(f"  message: {shown(stack, editor)}")
    print(f"  thread:  {thread(stack, editor)[-1]}")

    # The lead opens "Comment…" and approves in the modal, with a comment.
    lead = to[LEAD]
    post(
        stack,
        signed_form_opening(
            secret,
            user_id=users[LEAD],
            approval_id=approval.approval_id,
            conversation=lead.conversation,
            message_ts=lead.message_id,
            timestamp=int(time.time()),
        ),
    )
    views = stack.fake_slack.slack.views
    view = until(
        lambda: next((v for v in views.values() if v.get("submit")), None), "the modal's form"
    )
    status = post(
        stack,
        signed_form_submission(
            secret,
            view,
            user_id=users[LEAD],
            values={"decision": "approved", "comment": "Ship it"},
            timestamp=int(time.time()),
        ),
    )
    print(f"{LEAD} approved in the modal with a comment: Slack got {status}")
    ended = until(
        lambda: (
            (r := container.runs.get_run(run.run_id)).status.value in ("succeeded", "failed") and r
        ),
        "the run's end",
    )
    until(lambda: "Approved by" in shown(stack, lead), "the message edited")
    print(f"  message: {shown(stack, lead)}")
    print(f"run {run.run_id} {ended.status.value}")
    print(json.dumps(ended.outputs.get("review", {}), sort_keys=True, default=str))


def main() -> None:
    """Start the stack with the fake Slack, walk through, stop it."""
    with tempfile.TemporaryDirectory() as scratch:
        examples = Path(scratch) / "examples"
        examples.mkdir()
        (examples / HERE.name).symlink_to(HERE)
        # Its blocks and their scripted answers are the blog review's.
        (examples / "blog_review").symlink_to(HERE.parent / "blog_review")
        stack = start_local_stack(
            home=Path(scratch) / ".langorch", port=free_port(), examples=examples, slack=True
        )
        try:
            walk(stack)
        finally:
            stack.stop()


if __name__ == "__main__":
    main()
