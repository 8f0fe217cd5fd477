"""The emulator's fixes keep DynamoDB's promises: a transaction is all or nothing, even with the
narrow (per-item) backup that replaced moto's whole-table copy."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError
from moto import mock_aws

from langorch.local.emulator import narrow_transaction_backups

TABLE = "patched"


@pytest.fixture
def table() -> Iterator[Any]:
    with mock_aws():
        undo = narrow_transaction_backups()
        client = boto3.client("dynamodb", region_name="us-east-1")
        client.create_table(
            TableName=TABLE,
            KeySchema=[
                {"AttributeName": "pk", "KeyType": "HASH"},
                {"AttributeName": "sk", "KeyType": "RANGE"},
            ],
            AttributeDefinitions=[
                {"AttributeName": "pk", "AttributeType": "S"},
                {"AttributeName": "sk", "AttributeType": "S"},
            ],
            BillingMode="PAY_PER_REQUEST",
        )
        client.put_item(
            TableName=TABLE, Item={"pk": {"S": "run"}, "sk": {"S": "a"}, "n": {"N": "1"}}
        )
        try:
            yield client
        finally:
            undo()


def _items(client: Any) -> dict[str, str]:
    found = client.scan(TableName=TABLE, ConsistentRead=True)["Items"]
    return {item["sk"]["S"]: item["n"]["N"] for item in found}


def _update(sk: str, condition: str) -> dict[str, Any]:
    return {
        "Update": {
            "TableName": TABLE,
            "Key": {"pk": {"S": "run"}, "sk": {"S": sk}},
            "UpdateExpression": "SET n = :n",
            "ConditionExpression": condition,
            "ExpressionAttributeValues": {":n": {"N": "2"}},
        }
    }


def test_a_transaction_that_fails_a_condition_changes_nothing(table: Any):
    # Given a transaction that puts a new item, updates an existing one, and then fails
    put = {
        "Put": {"TableName": TABLE, "Item": {"pk": {"S": "run"}, "sk": {"S": "b"}, "n": {"N": "5"}}}
    }
    failing = _update("c", "attribute_exists(pk)")

    # When it is applied
    with pytest.raises(ClientError) as refused:
        table.transact_write_items(
            TransactItems=[put, _update("a", "attribute_exists(pk)"), failing]
        )

    # Then it is cancelled and every item is as before: the new one absent, the old unchanged
    assert refused.value.response["Error"]["Code"] == "TransactionCanceledException"
    assert _items(table) == {"a": "1"}


def test_a_transaction_whose_conditions_hold_applies_every_write(table: Any):
    put = {
        "Put": {"TableName": TABLE, "Item": {"pk": {"S": "run"}, "sk": {"S": "b"}, "n": {"N": "5"}}}
    }

    table.transact_write_items(TransactItems=[put, _update("a", "attribute_exists(pk)")])

    assert _items(table) == {"a": "2", "b": "5"}
