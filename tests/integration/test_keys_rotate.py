"""``langorch keys rotate`` against Secrets Manager (moto): links already emailed keep verifying."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from langorch.adapters.secrets import Secrets
from langorch.app.approvals.decisions import ensure_signing_key, load_signing_keys_fresh
from langorch.app.approvals.rotation import KeyRotationError, next_key_id, rotate_signing_key
from langorch.cli.main import main
from langorch.composition.container import Container
from langorch.domain.approvals.record import LinkForgedError, sign_link, verify_link
from tests.support.cli import fresh_emulator

NOW = datetime(2026, 11, 23, 12, 0, tzinfo=UTC)


@pytest.fixture
def container(endpoint: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Container:
    built = fresh_emulator(endpoint, tmp_path / "home", monkeypatch, stores=False)
    ensure_signing_key(built.secrets, built.settings.link_signing_secret)
    return built


def _rotate(capsys: pytest.CaptureFixture[str], endpoint: str, *args: str) -> tuple[int, Any]:
    code = main(["keys", "rotate", *args, "--endpoint-url", endpoint, "--json"])
    out = capsys.readouterr().out
    return code, json.loads(out) if out.strip() else None


def _link(container: Container) -> dict[str, str]:
    keys = load_signing_keys_fresh(container.secrets, container.settings.link_signing_secret)
    return sign_link(
        "apr-1", "a@example.org", NOW + timedelta(days=3), keys.current, keys.current_key
    )


def _verifies(container: Container, link: dict[str, str]) -> bool:
    keys = load_signing_keys_fresh(container.secrets, container.settings.link_signing_secret)
    try:
        verify_link("apr-1", link, keys.keys, now=NOW)
    except LinkForgedError:
        return False
    return True


def test_rotation_signs_with_a_new_key_and_keeps_emailed_links_working(
    container: Container, endpoint: str, capsys: pytest.CaptureFixture[str]
) -> None:
    # Given a link emailed with the first key
    emailed = _link(container)
    # When the key is rotated
    code, answer = _rotate(capsys, endpoint)
    # Then a new key signs, and the emailed link still verifies
    assert code == 0
    assert answer == {"current": "k2", "previous": "k1", "kept": ["k1", "k2"], "dropped": []}
    assert _link(container)["kid"] == "k2"
    assert _verifies(container, emailed)
    # And no key material reached the output
    stored = container.secrets.get_json(container.settings.link_signing_secret, fresh=True)
    assert stored["keys"]["k2"] not in json.dumps(answer)


def test_a_second_rotation_retires_the_oldest_key_unless_more_are_kept(
    container: Container, endpoint: str, capsys: pytest.CaptureFixture[str]
) -> None:
    first = _link(container)
    _rotate(capsys, endpoint)
    second = _link(container)
    # When rotated again with the default (keep 2)
    code, answer = _rotate(capsys, endpoint)
    # Then k1's links stop verifying, k2's still do
    assert (code, answer["dropped"], answer["kept"]) == (0, ["k1"], ["k2", "k3"])
    assert not _verifies(container, first)
    assert _verifies(container, second)
    # And with --keep 3 nothing more is dropped
    code, answer = _rotate(capsys, endpoint, "--keep", "3")
    assert (code, answer["kept"], answer["dropped"]) == (0, ["k2", "k3", "k4"], [])


def test_keeping_fewer_than_two_keys_is_refused(container: Container) -> None:
    secrets = Secrets(container.client("secretsmanager"))
    with pytest.raises(KeyRotationError, match="at least 2"):
        rotate_signing_key(secrets, container.settings.link_signing_secret, keep=1)
    assert load_signing_keys_fresh(secrets, container.settings.link_signing_secret).current == "k1"


def test_next_key_id_follows_the_highest_numbered_key() -> None:
    assert next_key_id([]) == "k1"
    assert next_key_id(["k1", "k7", "custom"]) == "k8"
