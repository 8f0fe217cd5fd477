"""The emulator writes item answers as plain JSON exactly as moto's serializer writes them.

Random items holding every attribute type (strings, numbers, binary, sets, nested lists and
maps) are read and written back through every operation that answers with items: each call is
made with the plain answers and again with moto's own serializer, from the same state, and
the answers boto3 reads must be equal.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import boto3
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from moto import mock_aws
from moto.dynamodb.responses import DynamoResult

from langorch.local.emulator import plain_item_answers

TABLE = "answers"
names = st.text("abcxyz_", min_size=1, max_size=6)
scalars = st.one_of(
    st.builds(lambda s: {"S": s}, st.text(max_size=12)),
    st.builds(lambda n: {"N": str(n)}, st.integers(-(10**12), 10**12)),
    st.builds(lambda n: {"N": f"{n:.3f}"}, st.floats(-1e6, 1e6, allow_nan=False)),
    st.builds(lambda b: {"B": b}, st.binary(max_size=12)),
    st.builds(lambda b: {"BOOL": b}, st.booleans()),
    st.just({"NULL": True}),
    st.builds(lambda s: {"SS": sorted(s)}, st.sets(st.text(min_size=1, max_size=5), min_size=1)),
    st.builds(lambda s: {"NS": sorted(str(n) for n in s)}, st.sets(st.integers(), min_size=1)),
    st.builds(lambda s: {"BS": sorted(s)}, st.sets(st.binary(min_size=1, max_size=4), min_size=1)),
)
values = st.recursive(
    scalars,
    lambda inner: st.one_of(
        st.builds(lambda items: {"L": items}, st.lists(inner, max_size=3)),
        st.builds(lambda fields: {"M": fields}, st.dictionaries(names, inner, max_size=3)),
    ),
    max_leaves=8,
)
items = st.dictionaries(names.map(lambda n: "a_" + n), values, max_size=5)


@contextmanager
def _serializer(moto_execute: Callable[..., Any]) -> Iterator[None]:
    patched = DynamoResult.execute_result
    DynamoResult.execute_result = moto_execute  # type: ignore[method-assign]
    try:
        yield
    finally:
        DynamoResult.execute_result = patched  # type: ignore[method-assign]


def _answer(call: Callable[[], dict[str, Any]]) -> dict[str, Any]:
    answer = call()
    answer.pop("ResponseMetadata", None)
    return answer


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(item=items, other=items)
def test_every_item_answer_is_written_as_moto_writes_it(
    item: dict[str, Any], other: dict[str, Any]
) -> None:
    with mock_aws():
        moto_execute = DynamoResult.execute_result
        undo = plain_item_answers()
        try:
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
            key = {"pk": {"S": "p"}, "sk": {"S": "1"}}
            stored = {**item, **key}
            replaced = {**other, **key}

            def reset() -> None:
                client.put_item(TableName=TABLE, Item=stored)

            calls: list[Callable[[], dict[str, Any]]] = [
                lambda: client.get_item(TableName=TABLE, Key=key),
                lambda: client.query(
                    TableName=TABLE,
                    KeyConditionExpression="pk = :p",
                    ExpressionAttributeValues={":p": {"S": "p"}},
                    ReturnConsumedCapacity="TOTAL",
                ),
                lambda: client.scan(TableName=TABLE),
                lambda: client.batch_get_item(RequestItems={TABLE: {"Keys": [key]}}),
                lambda: client.transact_get_items(
                    TransactItems=[{"Get": {"TableName": TABLE, "Key": key}}]
                ),
                lambda: client.put_item(TableName=TABLE, Item=replaced, ReturnValues="ALL_OLD"),
                lambda: client.update_item(
                    TableName=TABLE,
                    Key=key,
                    UpdateExpression="SET #x = :x",
                    ExpressionAttributeNames={"#x": "touched"},
                    ExpressionAttributeValues={":x": {"L": [stored.get("a_x", {"NULL": True})]}},
                    ReturnValues="ALL_NEW",
                ),
                lambda: client.delete_item(TableName=TABLE, Key=key, ReturnValues="ALL_OLD"),
            ]
            for call in calls:
                reset()
                plain = _answer(call)
                reset()
                with _serializer(moto_execute):
                    expected = _answer(call)
                assert plain == expected
        finally:
            undo()
