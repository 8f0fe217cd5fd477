"""``langorch workflows put`` prints a new webhook secret once and writes schedules;
``workflows rotate-secret`` prints the new secret once; ``hooks send`` delivers a Standard
Webhooks delivery that the official library verifies."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import requests
import yaml
from standardwebhooks import Webhook

from langorch.adapters.aws import make_client
from langorch.adapters.dynamodb.definitions import DefinitionsRepository
from langorch.adapters.secrets import Secrets
from langorch.cli.main import main
from langorch.config import Settings
from langorch.domain.webhooks import secret_values, standard_secret, verify
from tests.support.loopback import JsonHandler, serving

from .triggers_support import SCHEDULER_ROLE, TRIGGER_FN

HOOKED = {
    "workflows": [
        {
            "plan_id": "hooked",
            "memory": False,
            "triggers": [{"type": "webhook"}],
            "steps": [{"step_id": "s", "kind": "transform", "transform": {"x": "1"}}],
        }
    ]
}
SCHEDULED = {
    "workflows": [
        {
            "plan_id": "weekly",
            "memory": False,
            "schedule": {"cron_expression": "0 12 * * 2", "timezone": "America/New_York"},
            "steps": [{"step_id": "s", "kind": "transform", "transform": {"x": "1"}}],
        }
    ]
}


@dataclass
class Result:
    code: int
    stdout: str
    stderr: str


@pytest.fixture
def cli(
    endpoint: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> Any:
    monkeypatch.setenv("LANGORCH_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("LANGORCH_TRIGGER_FUNCTION_ARN", TRIGGER_FN)
    monkeypatch.setenv("LANGORCH_SCHEDULER_ROLE_ARN", SCHEDULER_ROLE)
    requests.post(f"{endpoint}/moto-api/reset", timeout=60).raise_for_status()
    DefinitionsRepository(
        make_client("dynamodb", Settings(endpoint_url=endpoint)), "langorch-definitions"
    ).create_table()

    def run(*argv: str) -> Result:
        capsys.readouterr()
        code = main([*argv, "--endpoint-url", endpoint])
        captured = capsys.readouterr()
        return Result(code, captured.out, captured.err)

    return run


def _write(path: Path, document: Any) -> str:
    path.write_text(yaml.safe_dump(document), encoding="utf-8")
    return str(path)


def _stored_secret(endpoint: str) -> dict[str, Any]:
    secrets = Secrets(make_client("secretsmanager", Settings(endpoint_url=endpoint)))
    return secrets.get_json("langorch/webhooks/hooked", fresh=True)


def test_put_prints_a_new_webhook_secret_once(cli: Any, endpoint: str, tmp_path: Path):
    # Given a workflow file with a webhook trigger
    path = _write(tmp_path / "hooked.yaml", HOOKED)

    # When it is put twice
    first = cli("workflows", "put", path)
    second = cli("workflows", "put", path)

    # Then the first output shows the stored secret on a labelled line; the second does not
    assert first.code == 0 and second.code == 0
    secret = _stored_secret(endpoint)["current"]
    assert f"webhook secret for hooked (shown once): {secret}" in first.stdout
    assert "webhook secret" not in second.stdout
    assert secret not in second.stdout


def test_put_json_includes_the_new_secret(cli: Any, endpoint: str, tmp_path: Path):
    # Given a workflow file with a webhook trigger
    path = _write(tmp_path / "hooked.yaml", HOOKED)

    # When it is put with --json
    result = cli("workflows", "put", path, "--json")

    # Then the document carries the secret for that workflow
    document = json.loads(result.stdout)
    (sync,) = document["triggers"]
    assert sync["workflow_id"] == "hooked"
    assert sync["webhook_secret"] == _stored_secret(endpoint)["current"]


def test_put_writes_the_schedule_and_says_so(cli: Any, tmp_path: Path):
    # Given a workflow with seed 000's schedule shorthand
    path = _write(tmp_path / "weekly.yaml", SCHEDULED)

    # When it is put
    result = cli("workflows", "put", path)

    # Then the schedule line shows AWS's cron and the timezone
    assert result.code == 0, result.stderr
    assert (
        "schedule langorch-weekly: created cron(0 12 ? * TUE *) America/New_York" in result.stdout
    )


def test_rotate_secret_prints_the_new_one_and_keeps_the_old_as_previous(
    cli: Any, endpoint: str, tmp_path: Path
):
    # Given a registered webhook workflow and its secret
    cli("workflows", "put", _write(tmp_path / "hooked.yaml", HOOKED))
    old = _stored_secret(endpoint)["current"]

    # When the secret is rotated
    result = cli("workflows", "rotate-secret", "hooked")

    # Then the new secret is printed once and the old one is kept as previous
    stored = _stored_secret(endpoint)
    assert result.code == 0
    assert f"(shown once): {stored['current']}" in result.stdout
    assert stored["previous"] == old and stored["current"] != old


def test_rotate_secret_of_a_workflow_without_a_webhook_fails_with_the_reason(
    cli: Any, tmp_path: Path
):
    # Given a workflow without a webhook trigger
    cli("workflows", "put", _write(tmp_path / "weekly.yaml", SCHEDULED))

    # When its secret is rotated
    result = cli("workflows", "rotate-secret", "weekly")

    # Then it fails with a one-line reason
    assert result.code != 0
    assert "no webhook trigger" in result.stderr


@dataclass
class Delivery:
    path: str
    headers: dict[str, str]
    body: bytes


@pytest.fixture
def receiver(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[Delivery]]:
    """A stand-in for the stack's public URL: records each POST and answers 202."""
    received: list[Delivery] = []

    class Handler(JsonHandler):
        def do_POST(self) -> None:
            body = self.body()
            received.append(Delivery(self.path, dict(self.headers.items()), body))
            self.send_json(202, {"run_id": "run-1", "created": True})

    with serving(Handler) as url:
        monkeypatch.setenv("LANGORCH_PUBLIC_BASE_URL", url)
        yield received


def test_hooks_send_delivers_what_the_official_library_verifies(
    cli: Any, endpoint: str, tmp_path: Path, receiver: list[Delivery]
):
    # Given a registered webhook workflow and its stored whsec_ secret
    cli("workflows", "put", _write(tmp_path / "hooked.yaml", HOOKED))
    secret = _stored_secret(endpoint)["current"]
    assert secret.startswith("whsec_")

    # When a delivery is sent with a chosen id
    result = cli("hooks", "send", "hooked", "--input", '{"n": 1}', "--delivery", "d-1")

    # Then it reached /hooks/hooked with the Standard Webhooks headers, the official library
    # verifies it, and the secret was never printed
    assert result.code == 0, result.stderr
    (delivery,) = receiver
    assert delivery.path == "/hooks/hooked"
    headers = {k.lower(): v for k, v in delivery.headers.items()}
    assert headers["webhook-id"] == "d-1"
    assert headers["webhook-signature"].startswith("v1,")
    assert Webhook(secret).verify(delivery.body, headers) == {"n": 1}
    assert secret not in result.stdout + result.stderr
    assert headers["webhook-signature"] not in result.stdout + result.stderr


def test_hooks_send_signs_with_a_secret_stored_before_standard_webhooks(
    cli: Any, endpoint: str, tmp_path: Path, receiver: list[Delivery]
):
    # Given a workflow whose stored secret has no whsec_ prefix (a stack from before the spec)
    cli("workflows", "put", _write(tmp_path / "hooked.yaml", HOOKED))
    secrets = Secrets(make_client("secretsmanager", Settings(endpoint_url=endpoint)))
    secrets.put_json("langorch/webhooks/hooked", {"current": "legacy_token_urlsafe-value"})

    # When a delivery is sent
    result = cli("hooks", "send", "hooked", "--delivery", "d-legacy")

    # Then the receiver's check accepts it with the stored secret, as does the official
    # library with its whsec_ form
    assert result.code == 0, result.stderr
    (delivery,) = receiver
    stored = secret_values(_stored_secret(endpoint))
    now = time.time()
    assert verify(delivery.headers, delivery.body, stored, now=now, tolerance_seconds=300) == (
        "d-legacy"
    )
    Webhook(standard_secret(stored[0])).verify(delivery.body, dict(delivery.headers))


EVENTED = {
    "workflows": [
        {
            "plan_id": "on_order",
            "memory": False,
            "triggers": [{"type": "event", "pattern": {"source": ["shop.orders"]}}],
            "steps": [{"step_id": "s", "kind": "transform", "transform": {"x": "1"}}],
        }
    ]
}


def _project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, listed: list[str]) -> Path:
    """A project folder with a cdk.json listing ``listed`` in event_workflows, as the cwd."""
    (tmp_path / "cdk.json").write_text(
        json.dumps({"context": {"langorch": {"event_workflows": listed}}})
    )
    folder = tmp_path / "workflows"
    folder.mkdir()
    (folder / "orders.yaml").write_text(yaml.safe_dump(EVENTED))
    monkeypatch.chdir(tmp_path)
    return folder / "orders.yaml"


def test_put_warns_when_an_event_trigger_has_no_deployed_rule(
    cli: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a project whose cdk.json lists another file in event_workflows
    file = _project(tmp_path, monkeypatch, ["other/events.yaml"])
    # When a workflow with an event trigger is put to the cloud from this file
    done = cli("workflows", "put", str(file))
    # Then it is stored, with a warning that no rule starts it and how to add one
    assert done.code == 0, done.stderr
    assert "workflow on_order has an event trigger but no deployed rule" in done.stderr
    assert "event_workflows" in done.stderr and "cdk deploy" in done.stderr


def test_put_does_not_warn_when_event_workflows_lists_the_files_folder(
    cli: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    file = _project(tmp_path, monkeypatch, ["workflows"])
    done = cli("workflows", "put", str(file))
    assert done.code == 0, done.stderr
    assert "no deployed rule" not in done.stderr
