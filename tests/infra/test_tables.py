"""Tables: key schemas the adapters use, on-demand, PITR, encryption, TTL where records expire."""

from __future__ import annotations

from typing import Any

import pytest

from tests.infra.conftest import Synth


def _table(synth: Synth, name: str) -> dict[str, Any]:
    table = getattr(synth.stack.tables, name)
    return synth.resources[synth.logical_id(table)]["Properties"]


@pytest.mark.parametrize(
    ("name", "keys", "ttl"),
    [
        ("definitions", ("pk", "sk"), None),
        ("runs", ("pk", "sk"), None),
        ("checkpoints", ("PK", "SK"), "ttl"),
        ("memory", ("PK", "SK"), "expires_at"),
    ],
)
def test_each_table_has_the_adapters_keys_and_is_durable(
    synth: Synth, name: str, keys: tuple[str, str], ttl: str | None
) -> None:
    # Given the synthesized stack / When reading the table / Then its settings are these.
    table = _table(synth, name)
    assert table["KeySchema"] == [
        {"AttributeName": keys[0], "KeyType": "HASH"},
        {"AttributeName": keys[1], "KeyType": "RANGE"},
    ]
    assert table["BillingMode"] == "PAY_PER_REQUEST"
    assert table["PointInTimeRecoverySpecification"] == {"PointInTimeRecoveryEnabled": True}
    assert table["SSESpecification"]["SSEEnabled"] is True
    if ttl:
        assert table["TimeToLiveSpecification"] == {"AttributeName": ttl, "Enabled": True}
    else:
        assert "TimeToLiveSpecification" not in table


def test_runs_table_has_both_sparse_indexes_with_all_attributes(synth: Synth) -> None:
    indexes = {i["IndexName"]: i for i in _table(synth, "runs")["GlobalSecondaryIndexes"]}
    assert set(indexes) == {"gsi1", "gsi2"}
    for name, index in indexes.items():
        assert index["KeySchema"] == [
            {"AttributeName": f"{name}pk", "KeyType": "HASH"},
            {"AttributeName": f"{name}sk", "KeyType": "RANGE"},
        ]
        assert index["Projection"] == {"ProjectionType": "ALL"}


def test_tables_are_retained_and_protected_by_default(synth: Synth) -> None:
    for table in synth.stack.tables.all:
        resource = synth.resources[synth.logical_id(table)]
        assert resource["DeletionPolicy"] == "Retain"
        assert resource["Properties"]["DeletionProtectionEnabled"] is True
