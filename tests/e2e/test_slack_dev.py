"""`langorch dev --slack`: the blog review example asks in the fake Slack, a signed press on the
gateway decides it, and the message is edited to show who decided (issue 30)."""

from __future__ import annotations

import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from langorch.app.runs import StartRun, launch_run
from langorch.domain.approvals.channels import posted_messages
from langorch.local.fake_slack import signed_interaction
from langorch.local.stack import LocalStack, free_port, start_local_stack
from tests.support.polling import wait_for

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
EDITOR = "editor@example.com"


@pytest.fixture
def stack(tmp_path: Path) -> Iterator[LocalStack]:
    running = start_local_stack(
        home=tmp_path / ".langorch", port=free_port(), examples=EXAMPLES, slack=True
    )
    yield running
    running.stop()


def _post(url: str, body: bytes, headers: dict[str, str]) -> int:
    request = urllib.request.Request(url, data=body, headers=headers, method="POST")  # noqa: S310
    with urllib.request.urlopen(request, timeout=60) as answer:  # noqa: S310 - loopback
        return int(answer.status)


def test_the_blog_review_is_decided_in_the_fake_slack(stack: LocalStack) -> None:
    container: Any = stack.container
    # Given a blog review run waiting on its editor
    run, _ = launch_run(
        StartRun("blog_review", {"commit_message": "Add S3 offload"}, trigger="manual"),
        container,
    )
    approval = wait_for(
        lambda: next(iter(container.approvals.list(pending_only=True, run_id=run.run_id)), None),
        what="the review's approval",
        timeout=120,
    )
    # Then the editor has a DM in Slack
    slack = stack.fake_slack.slack
    message = wait_for(
        lambda: next(iter(posted_messages(container.approvals.audit(approval.approval_id))), None),
        what="the Slack message",
    )
    assert message.to == EDITOR
    editor = next(u for u, e in slack.users.items() if e == EDITOR)
    # When the editor presses Approve (Slack's request, signed, to the gateway)
    secret = container.secrets.get_json(stack.settings.slack_secret)["signing_secret"]
    body, headers = signed_interaction(
        secret,
        user_id=editor,
        approval_id=approval.approval_id,
        decision="approved",
        conversation=message.conversation,
        message_ts=message.message_id,
        timestamp=int(time.time()),
    )
    assert _post(f"{stack.gateway_url}/slack/interactions", body, headers) == 200
    # Then the run succeeds, and the Slack message says the editor approved
    wait_for(
        lambda: container.runs.get_run(run.run_id).status.value == "succeeded",
        what="the run to succeed",
        timeout=120,
    )
    shown = slack.messages[message.conversation, message.message_id]
    assert f"Approved by {EDITOR}" in shown["text"]
