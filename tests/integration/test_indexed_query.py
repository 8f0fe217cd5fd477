"""The emulator's indexed Query answers every query as moto's own Query does.

Random tables (a string or a number sort key, an index with a sort key and one without), random
writes through every write path (put, update, delete, a transaction that may fail and roll back,
a batch) and random queries (key conditions, both directions, limits followed page by page,
filters, projections): each query is asked with the index and again with moto's Query, and the
answers must match page for page. moto's Query is the reference; the index only makes it fast.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import boto3
from botocore.exceptions import ClientError
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from moto import mock_aws
from moto.dynamodb.models.table import Table

from langorch.local.emulator import narrow_transaction_backups
from langorch.local.indexed_query import indexed_queries

TABLE = "indexed"
PKS = ["a", "b", "c"]
SORT_TEXT = ["a0", "a", "ab", "abc", "b", "ba", "c", "é", "z"]
STATUSES = ["running", "done", "failed"]
OWNERS = ["x", "y"]


def _sort_value(kind: str, n: int) -> dict[str, str]:
    return {"N": str(n - 3)} if kind == "N" else {"S": SORT_TEXT[n % len(SORT_TEXT)]}


def _create(client: Any, kind: str) -> None:
    client.create_table(
        TableName=TABLE,
        KeySchema=[
            {"AttributeName": "pk", "KeyType": "HASH"},
            {"AttributeName": "sk", "KeyType": "RANGE"},
        ],
        AttributeDefinitions=[
            {"AttributeName": "pk", "AttributeType": "S"},
            {"AttributeName": "sk", "AttributeType": kind},
            {"AttributeName": "status", "AttributeType": "S"},
            {"AttributeName": "started", "AttributeType": "N"},
            {"AttributeName": "owner", "AttributeType": "S"},
        ],
        GlobalSecondaryIndexes=[
            {
                "IndexName": "by_status",
                "KeySchema": [
                    {"AttributeName": "status", "KeyType": "HASH"},
                    {"AttributeName": "started", "KeyType": "RANGE"},
                ],
                "Projection": {"ProjectionType": "ALL"},
            },
            {
                "IndexName": "by_owner",
                "KeySchema": [{"AttributeName": "owner", "KeyType": "HASH"}],
                "Projection": {"ProjectionType": "KEYS_ONLY"},
            },
        ],
        BillingMode="PAY_PER_REQUEST",
    )


keys = st.tuples(st.sampled_from(PKS), st.integers(0, 8))
item_attrs = st.fixed_dictionaries(
    {
        "status": st.one_of(st.none(), st.sampled_from(STATUSES)),
        "started": st.one_of(st.none(), st.integers(0, 5)),
        "owner": st.one_of(st.none(), st.sampled_from(OWNERS)),
        "n": st.integers(0, 3),
    }
)
writes = st.one_of(
    st.tuples(st.just("put"), keys, item_attrs),
    st.tuples(st.just("update"), keys, item_attrs),
    st.tuples(st.just("delete"), keys, st.none()),
    st.tuples(st.just("transact"), st.lists(st.tuples(keys, item_attrs), min_size=1, max_size=3)),
    st.tuples(st.just("batch"), st.lists(st.tuples(keys, item_attrs), min_size=1, max_size=4)),
)
COMPARISONS = ["=", "<", "<=", ">", ">=", "BETWEEN", "begins_with"]
queries = st.fixed_dictionaries(
    {
        "index": st.sampled_from([None, "by_status", "by_owner"]),
        "partition": st.integers(0, 2),
        "comparison": st.one_of(st.none(), st.sampled_from(COMPARISONS)),
        "values": st.tuples(st.integers(0, 8), st.integers(0, 8)),
        "forward": st.booleans(),
        "limit": st.one_of(st.none(), st.integers(1, 4)),
        "filter": st.booleans(),
        "project": st.booleans(),
    }
)


def _item(kind: str, key: tuple[str, int], attrs: dict[str, Any]) -> dict[str, Any]:
    item: dict[str, Any] = {"pk": {"S": key[0]}, "sk": _sort_value(kind, key[1])}
    for name in ("status", "owner"):
        if attrs[name] is not None:
            item[name] = {"S": attrs[name]}
    if attrs["started"] is not None:
        item["started"] = {"N": str(attrs["started"])}
    item["n"] = {"N": str(attrs["n"])}
    return item


def _key(kind: str, key: tuple[str, int]) -> dict[str, Any]:
    return {"pk": {"S": key[0]}, "sk": _sort_value(kind, key[1])}


def _update(kind: str, key: tuple[str, int], attrs: dict[str, Any]) -> dict[str, Any]:
    sets, removes, values = ["n = :n"], [], {":n": {"N": str(attrs["n"])}}
    names = {"#status": "status", "#owner": "owner"}
    for name, placeholder, value in (
        ("status", "#status", attrs["status"] and {"S": attrs["status"]}),
        ("owner", "#owner", attrs["owner"] and {"S": attrs["owner"]}),
        ("started", "started", attrs["started"] is not None and {"N": str(attrs["started"])}),
    ):
        if value:
            sets.append(f"{placeholder} = :{name}")
            values[f":{name}"] = value
        else:
            removes.append(placeholder)
    expression = "SET " + ", ".join(sets) + (" REMOVE " + ", ".join(removes) if removes else "")
    return {
        "TableName": TABLE,
        "Key": _key(kind, key),
        "UpdateExpression": expression,
        "ExpressionAttributeNames": names,
        "ExpressionAttributeValues": values,
    }


def _write(client: Any, kind: str, write: tuple[Any, ...]) -> None:
    op = write[0]
    if op == "put":
        client.put_item(TableName=TABLE, Item=_item(kind, write[1], write[2]))
    elif op == "update":
        client.update_item(**_update(kind, write[1], write[2]))
    elif op == "delete":
        client.delete_item(TableName=TABLE, Key=_key(kind, write[1]))
    elif op == "transact":
        entries = []
        for number, (key, attrs) in enumerate(write[1]):
            if number % 2:
                update = _update(kind, key, attrs)
                update["ConditionExpression"] = "attribute_exists(pk)"  # may fail: rolls back
                entries.append({"Update": update})
            else:
                entries.append({"Put": {"TableName": TABLE, "Item": _item(kind, key, attrs)}})
        try:
            client.transact_write_items(TransactItems=entries)
        except ClientError as error:
            code = error.response["Error"]["Code"]
            assert code in ("TransactionCanceledException", "ValidationException"), code
    else:
        unique = {_item(kind, k, a)["sk"][kind] + k[0]: (k, a) for k, a in write[1]}
        requests = [
            {"PutRequest": {"Item": _item(kind, k, a)}}
            if a["n"] % 2
            else {"DeleteRequest": {"Key": _key(kind, k)}}
            for k, a in unique.values()
        ]
        client.batch_write_item(RequestItems={TABLE: requests})


def _request(kind: str, query: dict[str, Any]) -> dict[str, Any] | None:
    index, partition = query["index"], query["partition"]
    names: dict[str, str] = {}
    values: dict[str, Any] = {}
    if index is None:
        condition, values[":p"] = "pk = :p", {"S": PKS[partition]}
        sort_name, sort_kind = "sk", kind
    elif index == "by_status":
        condition, values[":p"] = "#s = :p", {"S": STATUSES[partition]}
        names["#s"] = "status"
        sort_name, sort_kind = "started", "N"
    else:
        condition, values[":p"] = "#o = :p", {"S": OWNERS[partition % 2]}
        names["#o"] = "owner"
        sort_name, sort_kind = "", ""
    comparison = query["comparison"]
    if comparison and sort_name:
        low, high = (_sort_value(sort_kind, v) for v in query["values"])
        if sort_kind == "N" and index is not None:
            low, high = {"N": str(query["values"][0] % 6)}, {"N": str(query["values"][1] % 6)}
        values[":low"] = low
        if comparison == "BETWEEN":
            if _ordered(high) < _ordered(low):
                return None  # DynamoDB refuses it; moto's answer is no reference
            values[":high"] = high
            condition += f" AND {sort_name} BETWEEN :low AND :high"
        elif comparison == "begins_with":
            if sort_kind != "S":
                return None
            condition += f" AND begins_with({sort_name}, :low)"
        else:
            condition += f" AND {sort_name} {comparison} :low"
    request: dict[str, Any] = {
        "TableName": TABLE,
        "KeyConditionExpression": condition,
        "ExpressionAttributeValues": values,
        "ScanIndexForward": query["forward"],
    }
    if index:
        request["IndexName"] = index
    if query["limit"]:
        request["Limit"] = query["limit"]
    if query["filter"]:
        request["FilterExpression"] = "attribute_not_exists(n) OR n <> :zero"
        values[":zero"] = {"N": "0"}
    if query["project"]:
        request["ProjectionExpression"] = "pk, sk"
    if names:
        request["ExpressionAttributeNames"] = names
    return request


def _ordered(value: dict[str, str]) -> Any:
    return float(value["N"]) if "N" in value else value["S"]


def _pages(client: Any, request: dict[str, Any]) -> list[tuple[list[Any], Any]]:
    pages, start = [], None
    for _ in range(60):
        asked = dict(request, ExclusiveStartKey=start) if start else request
        answer = client.query(**asked)
        start = answer.get("LastEvaluatedKey")
        pages.append((answer["Items"], start))
        if not start:
            return pages
    raise AssertionError("pagination never ended")


@contextmanager
def _moto_query(moto_query: Any) -> Iterator[None]:
    """moto's own Query for the duration (nothing is written meanwhile)."""
    patched = Table.query
    Table.query = moto_query  # type: ignore[method-assign]
    try:
        yield
    finally:
        Table.query = patched  # type: ignore[method-assign]


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    kind=st.sampled_from(["S", "N"]),
    history=st.lists(st.lists(writes, max_size=12), min_size=1, max_size=3),
    asked=st.lists(queries, min_size=1, max_size=6),
)
def test_every_query_answers_as_moto_does_after_any_writes(
    kind: str, history: list[list[tuple[Any, ...]]], asked: list[dict[str, Any]]
) -> None:
    with mock_aws():
        moto_query = Table.query
        undo_index = indexed_queries()
        undo_narrow = narrow_transaction_backups()
        try:
            client = boto3.client("dynamodb", region_name="us-east-1")
            _create(client, kind)
            for batch in history:  # queries between batches: the lists are kept, then updated
                for write in batch:
                    _write(client, kind, write)
                for query in asked:
                    request = _request(kind, query)
                    if request is None:
                        continue
                    indexed = _pages(client, request)
                    with _moto_query(moto_query):
                        reference = _pages(client, request)
                    items = [item for page, _ in indexed for item in page]
                    expected = [item for page, _ in reference for item in page]
                    assert items == expected, request
                    # Page by page, up to moto's last page (moto may end with one more, empty).
                    for (got, got_key), (want, want_key) in zip(indexed, reference, strict=False):
                        assert got == want, request
                        if got_key and want_key:
                            assert got_key == want_key, request
        finally:
            undo_narrow()
            undo_index()
