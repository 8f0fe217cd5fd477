"""The handlers' container: one per sandbox, built on first use; one boto3 session per process."""

from __future__ import annotations

import threading
from typing import Any

import boto3
import pytest

from langorch.composition.bootstrap import SandboxContainer
from langorch.composition.container import Container
from langorch.config import Settings


def test_the_container_is_built_once_from_the_environment_and_shared_by_threads(
    monkeypatch: pytest.MonkeyPatch,
):
    # Given a sandbox whose environment names the runs table
    monkeypatch.setenv("LANGORCH_RUNS_TABLE", "runs-from-env")
    container = SandboxContainer()

    # When eight invocations ask for the container at once
    seen: list[Container] = []
    barrier = threading.Barrier(8)

    def invoke() -> None:
        barrier.wait()
        seen.append(container())

    threads = [threading.Thread(target=invoke) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    # Then they all got the same container, built from the environment's settings
    assert len(seen) == 8 and all(c is seen[0] for c in seen)
    assert seen[0].settings.runs_table == "runs-from-env"
    assert container() is seen[0]


def test_each_sandbox_builds_its_own_container():
    # Given two sandboxes (locally, two handler modules or one re-imported for a new stack)
    first, second = SandboxContainer(), SandboxContainer()

    # Then each builds its own container
    assert first() is not second()


def test_an_installed_container_is_used_and_the_previous_one_given_back():
    # Given a sandbox whose container was built
    container = SandboxContainer()
    built = container()

    # When a test installs its own
    mine = Container(Settings(runs_table="mine"))
    previous = container.use(mine)

    # Then the handler gets it, and the one it replaced comes back
    assert container() is mine
    assert previous is built
    assert SandboxContainer(mine)() is mine


def test_every_handler_holds_a_sandbox_container():
    # Given the four handler modules
    import functions.approval_callback.handler as callback
    import functions.request_approval.handler as request
    import functions.run_segment.handler as runner
    import functions.trigger.handler as trigger

    # Then each builds its container the one shared way
    for module in (callback, request, runner, trigger):
        assert isinstance(module.container, SandboxContainer), module.__name__


def test_the_clients_of_one_container_share_one_boto3_session(monkeypatch: pytest.MonkeyPatch):
    # Given a count of the boto3 sessions built
    created: list[Any] = []
    original = boto3.Session.__init__

    def counting(self: boto3.Session, *args: Any, **kwargs: Any) -> None:
        created.append(self)
        original(self, *args, **kwargs)

    monkeypatch.setattr(boto3.Session, "__init__", counting)
    settings = Settings(region="eu-north-1", endpoint_url="http://127.0.0.1:1")

    # When two containers (two sandboxes) build clients of three services each
    containers = [Container(settings), Container(settings)]
    clients = [c.client(s) for c in containers for s in ("dynamodb", "s3", "stepfunctions")]

    # Then each container built one session, and every client is at the settings' region and
    # endpoint
    assert len(created) == 2
    assert {c.meta.region_name for c in clients} == {"eu-north-1"}
    assert {c.meta.endpoint_url for c in clients} == {"http://127.0.0.1:1"}
