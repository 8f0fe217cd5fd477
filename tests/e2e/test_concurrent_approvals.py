"""100 approval clicks at once through `langorch dev`'s gateway: each decided by its approver.

Every click is a POST to the approval callback; locally the functions run in Lambda-like
sandboxes (one invocation at a time each), so no click can read another's request — the bug
this guards against answered one click in a hundred 403 "forged link" (the handler read
Powertools' ``app.current_event`` after another thread replaced it) and logged lines under
another function's request id.
"""

from __future__ import annotations

import html
import json
import re
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import pytest

from langorch.app.runs import StartRun, launch_run
from langorch.composition.bootstrap import build_container
from langorch.local.stack import LocalStack
from tests.support import loopback
from tests.support.polling import wait_for
from tests.support.stacks import running_stack

CLICKS = 100
APPROVERS = ["ana@example.com", "ben@example.com"]
WORKFLOW = f"""
workflows:
  - plan_id: many_gates
    memory: false
    approvers: {json.dumps(APPROVERS)}
    inputs_schema: {{properties: {{n: {{type: integer}}}}, required: [n]}}
    steps:
      - step_id: gate
        kind: approval
        approval: {{title: "Item {{{{ n }}}}", timeout_seconds: 3600}}
        branches: {{approved: done, rejected: done}}
      - {{step_id: done, kind: transform, transform: {{finished: "n"}}}}
"""
"""One approval per run, emailed to two approvers: each click uses one of the two links."""


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalStack]:
    home = tmp_path_factory.mktemp("approvals") / ".langorch"
    with running_stack(home, definitions=WORKFLOW) as running:
        yield running


def request(url: str, method: str = "GET", body: bytes | None = None, headers: Any = None) -> Any:
    # Generous: on a busy machine 100 clicks queue for the sandboxes; only a hang should fail.
    return loopback.request(url, method, body, headers, timeout=600)


def _links(outbox: Path) -> dict[tuple[str, str], str]:
    """(approval id, approver) -> the emailed link."""
    found: dict[tuple[str, str], str] = {}
    for path in outbox.glob("*.json"):
        message = json.loads(path.read_text())
        found[(message["approval_id"], message["to"])] = message["link"]
    return found


def _nonce(link: str) -> str:
    status, page = request(link)
    assert status == 200, f"the approval page answered {status}"
    found = re.search(r'name="nonce" value="([^"]*)"', page.decode())
    assert found is not None, "the approval page has no nonce"
    return html.unescape(found.group(1))


# 100 runs through the whole pipeline: about a minute on an idle two-core machine, far more on
# a busy one; the limit is generous so only a hang fails it.
@pytest.mark.slow
@pytest.mark.timeout(1200)
def test_a_hundred_simultaneous_clicks_are_each_decided_by_their_own_approver(
    stack: LocalStack,
):
    # Given 100 runs, each parked on its approval, every approval emailed to two approvers
    container = build_container(stack.settings)
    with ThreadPoolExecutor(max_workers=16) as pool:
        runs = list(
            pool.map(
                lambda n: launch_run(StartRun("many_gates", input={"n": n}), container)[0].run_id,
                range(CLICKS),
            )
        )
    outbox = Path(stack.settings.outbox_dir or "")
    emails = CLICKS * len(APPROVERS)
    # Counted by name while they arrive (each .json appears whole), read once enough are there:
    # the wait does not re-read up to 200 emails twice a second.
    links = wait_for(
        lambda: (
            sum(1 for _ in outbox.glob("*.json")) >= emails
            and (found := _links(outbox))
            and len(found) >= emails
            and found
        ),
        what="every approval email",
        timeout=900,
        interval=0.5,
    )
    approvals = sorted({approval_id for approval_id, _ in links})
    assert len(approvals) == CLICKS
    # Approval i is decided from approver i % 2's link (each opened first, for its form).
    chosen = {aid: APPROVERS[i % 2] for i, aid in enumerate(approvals)}
    with ThreadPoolExecutor(max_workers=16) as pool:
        views = pool.map(lambda a: _nonce(links[(a, chosen[a])]), approvals)
        nonces = dict(zip(approvals, views, strict=True))
    viewed = time.monotonic()
    # A form decides only a dwell after its page view (a bot's instant POST is refused): the
    # clicks come once that has passed for the last page opened.
    time.sleep(
        max(0.0, stack.settings.approval_form_dwell_seconds + 0.5 - (time.monotonic() - viewed))
    )

    # When all 100 decisions are posted at the same moment
    start = threading.Barrier(CLICKS)

    def click(approval_id: str) -> tuple[int, str]:
        form = urlencode({"nonce": nonces[approval_id], "decision": "approved"}).encode()
        start.wait()
        status, page = request(
            links[(approval_id, chosen[approval_id])],
            "POST",
            form,
            {"Content-Type": "application/x-www-form-urlencoded"},
        )
        return status, page.decode(errors="replace")

    with ThreadPoolExecutor(max_workers=CLICKS) as pool:
        answers: dict[str, Any] = dict(zip(approvals, pool.map(click, approvals), strict=True))

    # Then every click is answered 200, none refused as forged or for another approval
    refused = {aid: status for aid, (status, _) in answers.items() if status != 200}
    assert refused == {}
    # And each approval is decided, by the approver whose link was clicked
    decided = {aid: container.approvals.get(aid) for aid in approvals}
    wrong = {
        aid: (a.status.value, a.decided_by, chosen[aid])
        for aid, a in decided.items()
        if a is None or a.status.value != "approved" or a.decided_by != chosen[aid]
    }
    assert wrong == {}
    # And every run resumes and ends once
    ended = wait_for(
        lambda: all(container.runs.get_run(r).is_terminal for r in runs),
        what="every run to end",
        timeout=900,
        interval=0.5,
    )
    assert ended
    assert {container.runs.get_run(r).status.value for r in runs} == {"succeeded"}
