"""Shared fixtures: AWS is moto, in-process; no test touches the network.

boto3 and moto are imported by the fixtures that use them: xdist's controller loads this file
too and runs no test (~0.7 s of CPU per session for the two).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator
from typing import Any

import pytest

REGION = "us-east-1"


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Each test's timeout (pytest-timeout: the suite's 300 s or its own mark) scales with
    ``LANGORCH_TEST_PATIENCE``, as every ``wait_for`` deadline does: a busy machine sets 3 and
    the 400-step run keeps the same bound relative to its work, instead of timing out at load 18.
    """
    from tests.support.polling import PATIENCE

    if PATIENCE == 1:
        return
    suite = float(config.getini("timeout") or 0)
    for item in items:
        mark = item.get_closest_marker("timeout")
        seconds = float(mark.args[0]) if mark is not None and mark.args else suite
        if seconds:
            item.add_marker(pytest.mark.timeout(seconds * PATIENCE), append=False)


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """Files that share a session fixture go to one xdist worker (``tests/support/scheduling``)."""
    from tests.support.scheduling import make_scheduler

    return make_scheduler(config, log)


@pytest.hookimpl(wrapper=True)
def pytest_make_collect_report(collector: pytest.Collector) -> Iterator[Any]:
    """A test module is imported (rewritten, compiled) by one worker while the other waits to
    read the cache, instead of both compiling it at once in a fresh clone
    (``tests/support/collect_once``)."""
    if not isinstance(collector, pytest.Module):
        return (yield)
    from tests.support.collect_once import importing_alone

    with importing_alone(collector.path):
        return (yield)


@pytest.fixture(autouse=True)
def _no_real_aws(monkeypatch: pytest.MonkeyPatch) -> None:
    """Fake credentials so nothing can reach a real account by accident."""
    for name in ("AWS_PROFILE", "AWS_SESSION_TOKEN", "AWS_SECURITY_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setenv("AWS_DEFAULT_REGION", REGION)
    for name in list(os.environ):
        if name.startswith("LANGORCH_"):
            monkeypatch.delenv(name)


@pytest.fixture
def aws() -> Iterator[None]:
    """Every AWS call in the test goes to moto, in-process, as published.

    ``mock_aws`` resets boto3's default session; the one set here reads botocore's service
    models through the process's shared data loader (boto3's public ``botocore_session``
    argument), so each test's clients do not parse the models again (~0.1 s of CPU each).
    """
    from moto import mock_aws

    from tests.support.aws import default_session_on_shared_loader

    with mock_aws():
        default_session_on_shared_loader()
        yield


@pytest.fixture
def dynamodb(aws: None) -> Any:
    """A DynamoDB client of moto whose requests are atomic, as DynamoDB's are (threads race
    through it: ``tests/support/aws.py``)."""
    import boto3

    from tests.support.aws import one_request_at_a_time

    return one_request_at_a_time(boto3.client("dynamodb", region_name=REGION))


@pytest.fixture
def openai_server() -> Iterator[Any]:
    """A fake OpenAI-compatible server on loopback (``tests/llm_servers.py``)."""
    from tests.llm_servers import FakeOpenAI

    with FakeOpenAI().running() as server:
        yield server


@pytest.fixture
def bedrock_server() -> Iterator[Any]:
    """A fake Bedrock runtime on loopback (``tests/llm_servers.py``)."""
    from tests.llm_servers import FakeBedrock

    with FakeBedrock().running() as server:
        yield server


@pytest.fixture
def s3(aws: None) -> Any:
    import boto3

    return boto3.client("s3", region_name=REGION)


@pytest.fixture
def sqlite_db(tmp_path: Any) -> Any:
    """The embedded default's database: a fresh SQLite file (WAL) under the test's folder."""
    from langorch.adapters.sqlite._db import Database

    return Database(tmp_path / "langorch.db")


# --------------------------------------------------------------------------------------------
# Suite-wide guard: no Step Functions task token in any log line or email written by any test.
# --------------------------------------------------------------------------------------------


FAKE_TASK_TOKENS: list[str] = []
"""Task tokens the in-memory executions issued (use-case tests on fakes add theirs here), held
to the same rule as moto's: none may appear in a log line, an email or a page."""


class _EveryLogLine(logging.Handler):
    """Keeps every record any logger emits, message and structured extras alike."""

    def __init__(self) -> None:
        super().__init__(level=logging.DEBUG)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        try:
            self.lines.append(f"{record.getMessage()} {record.__dict__!r}")
        except Exception:  # a record that cannot render is not this guard's business
            self.lines.append(repr(record.__dict__))


@pytest.fixture(scope="session", autouse=True)
def _task_tokens_never_leak(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """Record every task token the emulator hands a function (the state machine's approval
    tasks); at the end, none may appear in a log line, an outbox email or an approval page the
    suite wrote (RELIABILITY.md "Approval links")."""
    from langorch.local.lambdas import INVOCATION_OBSERVERS

    issued: list[str] = []

    def recording(function_name: str, event: Any) -> None:
        token = event.get("task_token") if isinstance(event, dict) else None
        if isinstance(token, str):
            issued.append(token)

    INVOCATION_OBSERVERS.append(recording)
    lines = _EveryLogLine()
    # Observe every record any logger handles: Powertools turns propagation off on the
    # langorch loggers it configures, so a handler on the root logger would miss them.
    call_handlers = logging.Logger.callHandlers

    def observed(self: logging.Logger, record: logging.LogRecord) -> None:
        lines.emit(record)
        call_handlers(self, record)

    logging.Logger.callHandlers = observed  # type: ignore[method-assign]
    yield
    logging.Logger.callHandlers = call_handlers  # type: ignore[method-assign]
    INVOCATION_OBSERVERS.remove(recording)
    written = [
        path.read_text(errors="replace")
        for path in tmp_path_factory.getbasetemp().rglob("*")
        if path.is_file() and path.suffix in (".eml", ".json", ".html", ".txt", ".log")
    ]
    every = set(issued) | set(FAKE_TASK_TOKENS)
    leaks = [t for t in every if any(t in text for text in [*lines.lines, *written])]
    assert not leaks, f"{len(leaks)} of {len(every)} task token(s) leaked into logs or emails"
