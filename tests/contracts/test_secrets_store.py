"""Contract of the secrets store (``SecretsStore``): Secrets Manager on moto, the local SQLite
store and the fake."""

from __future__ import annotations

import pytest

from langorch.adapters.secrets import Secrets
from langorch.adapters.sqlite.secrets import SqliteSecrets
from langorch.domain.errors import SecretNotFoundError
from tests.fakes import InMemorySecrets
from tests.support.stores import under_contract

Store = Secrets | InMemorySecrets | SqliteSecrets


@pytest.fixture(params=["fake", "sqlite", "secretsmanager"])
def store(request: pytest.FixtureRequest) -> Store:
    return under_contract(request, InMemorySecrets, SqliteSecrets, _on_moto, cloud_fixture="aws")


def _on_moto(_: None) -> Secrets:
    import boto3

    return Secrets(boto3.client("secretsmanager", region_name="us-east-1"))


def test_a_stored_secret_reads_back(store: Store) -> None:
    assert store.put_json("hooks/a", {"current": "s1"}) is True
    assert store.get_json("hooks/a") == {"current": "s1"}
    assert store.exists("hooks/a")


def test_a_missing_secret_is_not_found_and_does_not_exist(store: Store) -> None:
    assert not store.exists("hooks/none")
    with pytest.raises(SecretNotFoundError, match="hooks/none"):
        store.get_json("hooks/none")


def test_putting_again_updates_and_says_so(store: Store) -> None:
    store.put_json("hooks/a", {"current": "s1"})
    assert store.put_json("hooks/a", {"current": "s2", "previous": "s1"}) is False
    assert store.get_json("hooks/a", fresh=True) == {"current": "s2", "previous": "s1"}


def test_a_cached_read_keeps_the_old_value_until_a_fresh_read(store: Store) -> None:
    # Given a secret read once (cached for the process)
    store.put_json("hooks/a", {"current": "s1"})
    store.get_json("hooks/a")
    # When another process rotates it
    store.put_json("hooks/a", {"current": "s2"})
    # Then a plain read still sees the old value, and a fresh read the new one
    assert store.get_json("hooks/a") == {"current": "s1"}
    assert store.get_json("hooks/a", fresh=True) == {"current": "s2"}


def test_replacing_changes_an_existing_secret_and_refuses_a_missing_one(store: Store) -> None:
    store.put_json("keys/link", {"current": "k1"})
    store.replace_json("keys/link", {"current": "k2"})
    assert store.get_json("keys/link", fresh=True) == {"current": "k2"}
    with pytest.raises(SecretNotFoundError, match="keys/none"):
        store.replace_json("keys/none", {"current": "k1"})
