"""Tables: key schemas the adapters use, on-demand, PITR, encryption, TTL where records expire."""

from __future__ import annotations

from typing import Any

import pytest

from langorch.adapters.dynamodb._run_items import table_definition
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


def test_runs_table_has_the_adapters_indexes_without_the_record_body(synth: Synth) -> None:
    # The deployed indexes are the ones the adapter creates locally: keys, run_id and status
    # only (a listing reads the records by key; issue 33).
    indexes = {i["IndexName"]: i for i in _table(synth, "runs")["GlobalSecondaryIndexes"]}
    adapters = {i["IndexName"]: i for i in table_definition()["GlobalSecondaryIndexes"]}
    assert set(indexes) == set(adapters) == {"gsi1", "gsi2"}
    for name, index in indexes.items():
        assert index["KeySchema"] == adapters[name]["KeySchema"]
        assert index["Projection"] == adapters[name]["Projection"]
        assert index["Projection"]["ProjectionType"] == "INCLUDE"


def test_tables_are_retained_and_protected_by_default(synth: Synth) -> None:
    for table in synth.stack.tables.all:
        resource = synth.resources[synth.logical_id(table)]
        assert resource["DeletionPolicy"] == "Retain"
        assert resource["Properties"]["DeletionProtectionEnabled"] is True
