"""The console serves a run's attached files as downloads: only to a signed-in browser, only
what the run's listing returns (no path reaches another file, however it is spelled), as an
attachment that is never rendered. The page in a browser: tests/browser."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from langorch.adapters.local_artifacts import FolderArtifacts
from langorch.console.app import ConsoleApp, headers_for
from langorch.console.http import Request, Response, Sessions
from langorch.console.operator import Operator
from langorch.domain.runs import RunStatus
from tests.fakes.approvals import InMemoryApprovals
from tests.fakes.runs import InMemoryRuns
from tests.support.records import a_run

T0 = datetime(2026, 1, 1, tzinfo=UTC)
TOKEN = "the-start-up-token"
SESSIONS = Sessions(b"k" * 32, token=TOKEN)
SESSION = SESSIONS.open(TOKEN) or ""
SECRET = b"a file of the bucket no run attached"


class _Stack:
    """A stack with one run and its home's bucket folder: the run's artifacts beside a file
    that is not one of them, and the stack file."""

    def __init__(self, home: Path) -> None:
        self.runs = InMemoryRuns()
        self.approvals = InMemoryApprovals()
        self.artifacts = FolderArtifacts(home / "bucket" / "artifacts")
        (home / "bucket" / "inbox").mkdir(parents=True)
        (home / "bucket" / "inbox" / "secret.csv").write_bytes(SECRET)
        (home / "stack.json").write_bytes(SECRET)

    def clock(self) -> datetime:
        return T0


@pytest.fixture
def stack(tmp_path: Path) -> _Stack:
    stack = _Stack(tmp_path)
    stack.runs.create_run(a_run("run-1", workflow_id="report", status=RunStatus.succeeded, at=T0))
    stack.artifacts.put("run-1", "keep", "ré port (1).csv", b"a,b\n1,2\n", "text/csv")
    stack.artifacts.put("run-1", "keep", "page.html", b"<script>alert(1)</script>", "text/html")
    return stack


def _get(stack: _Stack, path: str, session: str = SESSION) -> Response:
    app = ConsoleApp(
        stack, "the test stack", frozenset(), Operator("ana", "OS user", None), SESSIONS
    )
    return app.handle(Request("GET", path, {}, {}, session=session))


def test_a_file_downloads_under_its_name_with_its_type(stack: _Stack) -> None:
    # When the signed-in browser follows the run page's link (each part percent-encoded)
    response = _get(stack, "/runs/run-1/artifacts/keep/r%C3%A9%20port%20%281%29.csv")
    # Then it gets the bytes, as an attachment named as the file (RFC 6266, UTF-8)
    assert response.status == 200
    assert response.body == b"a,b\n1,2\n"
    assert response.content_type == "text/csv"
    assert response.headers["Content-Disposition"] == (
        "attachment; filename=\"r_ port (1).csv\"; filename*=UTF-8''r%C3%A9%20port%20%281%29.csv"
    )


def test_a_file_is_never_rendered_whatever_its_type(stack: _Stack) -> None:
    response = _get(stack, "/runs/run-1/artifacts/keep/page.html")
    headers = headers_for(response)
    assert headers["Content-Disposition"].startswith("attachment;")
    assert headers["Content-Security-Policy"] == "default-src 'none'; sandbox"
    assert headers["X-Content-Type-Options"] == "nosniff"


def test_a_browser_without_the_consoles_session_gets_nothing(stack: _Stack) -> None:
    response = _get(stack, "/runs/run-1/artifacts/keep/page.html", session="")
    assert response.status == 401
    assert b"<script>" not in response.body


@pytest.mark.parametrize(
    "path",
    [
        "/runs/run-1/artifacts/keep/..%2F..%2Finbox%2Fsecret.csv",
        "/runs/run-1/artifacts/..%2F..%2Finbox/secret.csv",
        "/runs/run-1/artifacts/%2E%2E/..%2Fstack.json",
        "/runs/run-1/artifacts/../../inbox/secret.csv",
        "/runs/run-1/artifacts/keep/%2E%2E%2F%2E%2E%2F%2E%2E%2Fstack.json",
        "/runs/..%2Fbucket%2Finbox/artifacts/x/secret.csv",
        "/runs/run-1/artifacts/..%5C..%5Cinbox/secret.csv",
        "/runs/run-1/artifacts/keep/.page.html.json",  # the file's own record
        "/runs/run-1/artifacts/keep/page.html%00.csv",
        "/runs/run-2/artifacts/keep/page.html",  # another run's
    ],
)
def test_no_path_reaches_a_file_the_run_did_not_attach(stack: _Stack, path: str) -> None:
    # When a path tries to leave the run's files, however it is spelled
    response = _get(stack, path)
    # Then it is not found, and nothing of another file is in the answer
    assert response.status == 404
    assert SECRET not in response.body
    assert b'{"content_type"' not in response.body
