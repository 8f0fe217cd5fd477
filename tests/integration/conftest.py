"""Engine fixtures: a real container (DynamoDB, S3 on moto), the offline LLM, definitions."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import requests

from langorch.app.definitions import register_block, register_workflow, seed_builtins
from langorch.app.runs import SegmentResult, StartRun, drive, start_run
from langorch.composition.container import Container
from langorch.config import Settings
from langorch.domain.loading import load_file, load_text
from langorch.llm import LLMRegistry
from tests.support.aws import one_request_at_a_time

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"

MakeContainer = Callable[..., Container]
UseContainer = Callable[[ModuleType, Container], None]


@pytest.fixture
def handler_container() -> Iterator[UseContainer]:
    """Install a container as a handler module's sandbox container for one test."""
    restore: list[tuple[ModuleType, Container | None]] = []

    def use(handler: ModuleType, container: Container) -> None:
        restore.append((handler, handler.container.use(container)))

    yield use
    for handler, previous in reversed(restore):
        handler.container.use(previous)


def _containers(build: Callable[..., Container], **defaults: Any) -> MakeContainer:
    """``build`` a container per call (a new process on the same stores), its settings the
    call's over ``defaults``; the first one creates the stores and seeds the built-in blocks."""
    created = False

    def make(script: dict[str, Any] | str | Path | None = None, **settings: Any) -> Container:
        nonlocal created
        llm = LLMRegistry(default_provider="offline", offline_script=script)
        container = build(Settings(**{**defaults, **settings}), llm=llm)
        if not created:
            container.ensure_resources()
            seed_builtins(container.definitions)
            created = True
        return container

    return make


@pytest.fixture
def make_container(aws: None) -> Iterator[MakeContainer]:
    """Build containers that share one moto account: a new container is a new process (its
    DynamoDB requests atomic, as DynamoDB's are)."""

    def build(settings: Settings, llm: LLMRegistry) -> Container:
        container = Container(settings, llm=llm)
        # Each request atomic, as DynamoDB's are (threads race through these containers).
        one_request_at_a_time(container.client("dynamodb"))
        return container

    yield _containers(build)


@pytest.fixture
def make_embedded(aws: None, tmp_path: Path) -> Iterator[MakeContainer]:
    """Build containers on one embedded home (``langorch dev``'s SQLite stores, which pass the
    DynamoDB adapters' contract suites): for tests of engine behaviour, not of DynamoDB. Each
    new container is a new process on the same home. (``aws``: no request reaches a real
    account by accident.)"""
    from langorch.composition.bootstrap import build_container

    yield _containers(build_container, local_home=str(tmp_path / "home"))


def register_text(container: Container, text: str) -> None:
    """Register the blocks, then the workflows, of a YAML document."""
    loaded = load_text(text, source="test.yaml", fmt="yaml")
    for block in loaded.blocks:
        register_block(container.definitions, block)
    for plan in loaded.workflows:
        register_workflow(container.definitions, plan)


def register_example(container: Container, name: str) -> None:
    loaded = load_file(EXAMPLES / name / "definitions.yaml")
    for block in loaded.blocks:
        register_block(container.definitions, block)
    for plan in loaded.workflows:
        register_workflow(container.definitions, plan)


def approve_all(request: dict[str, Any]) -> dict[str, Any]:
    return {"decision": "approved", "approver": "tester@example.com"}


def run_to_end(
    container: Container,
    workflow_id: str,
    data: dict[str, Any] | None = None,
    *,
    on_approval: Callable[[dict[str, Any]], dict[str, Any]] = approve_all,
    user_id: str = "u1",
) -> SegmentResult:
    run, _ = start_run(StartRun(workflow_id, input=data or {}, user_id=user_id), container)
    return drive(run.run_id, container, on_approval=on_approval, sleep=lambda s: None)


@pytest.fixture(scope="module")
def endpoint() -> Iterator[str]:
    """The emulator in server mode on a free loopback port, for tests that go through HTTP."""
    from moto.server import ThreadedMotoServer

    from langorch.local.stack import free_port

    port = free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    yield f"http://127.0.0.1:{port}"
    # moto's backends outlive the server in this process: leave nothing for later tests.
    requests.post(f"http://127.0.0.1:{port}/moto-api/reset", timeout=60)
    server.stop()
