"""Named registrations in the definitions table: one item each, replaced in place.

    pk              sk     attributes
    --------------  -----  ----------------------------------------------------------------
    <kind>#<name>   head   kind, id, body (the registration as JSON)

A registration has no versions: adding it again replaces it. Its ``kind`` keeps it out of the
other listings, which filter on ``kind``; a body holds secret ids only, never a secret's value.
Tool servers (:mod:`.tool_servers`) and agents (:mod:`.agents`) are such registrations.
"""

from __future__ import annotations

import json
from typing import Any, ClassVar, Generic, TypeVar

from botocore.exceptions import BotoCoreError, ClientError
from pydantic import BaseModel

from langorch.domain.errors import StorageError

HEAD_SK = "head"


R = TypeVar("R", bound=BaseModel)


class Registrations(Generic[R]):
    """Registrations of one ``kind`` in the definitions table (subclasses name the kind, the
    model and the noun their errors use).

    Args:
        client: a boto3 DynamoDB client (low-level).
        table_name: the definitions table.
    """

    kind: ClassVar[str]
    noun: ClassVar[str]
    model: type[R]

    def __init__(self, client: Any, table_name: str) -> None:
        self._client = client
        self._table = table_name

    def pk(self, name: str) -> str:
        """The partition key of the registration named ``name``."""
        return f"{self.kind}#{name}"

    def put(self, registration: R) -> bool:
        """Store (or replace) a registration; returns whether it is new."""
        name = _name(registration)
        item = {
            "pk": {"S": self.pk(name)},
            "sk": {"S": HEAD_SK},
            "kind": {"S": self.kind},
            "id": {"S": name},
            "body": {"S": registration.model_dump_json()},
        }
        try:
            response = self._client.put_item(
                TableName=self._table, Item=item, ReturnValues="ALL_OLD"
            )
        except (ClientError, BotoCoreError) as exc:
            raise StorageError(f"cannot store {self.noun} {name!r} in {self._table!r}") from exc
        return "Attributes" not in response

    def get(self, name: str) -> R | None:
        """The registration named ``name``, or ``None``."""
        try:
            response = self._client.get_item(
                TableName=self._table,
                Key={"pk": {"S": self.pk(name)}, "sk": {"S": HEAD_SK}},
                ConsistentRead=True,
            )
        except (ClientError, BotoCoreError) as exc:
            raise StorageError(f"cannot read {self.noun} {name!r} from {self._table!r}") from exc
        item = response.get("Item")
        return None if item is None else self._read(item)

    def list(self) -> list[R]:
        """Every registration, by name."""
        request: dict[str, Any] = {
            "TableName": self._table,
            "FilterExpression": "#kind = :kind AND #sk = :head",
            "ExpressionAttributeNames": {"#kind": "kind", "#sk": "sk"},
            "ExpressionAttributeValues": {":kind": {"S": self.kind}, ":head": {"S": HEAD_SK}},
            "ConsistentRead": True,
        }
        found: list[R] = []
        while True:
            try:
                response = self._client.scan(**request)
            except (ClientError, BotoCoreError) as exc:
                raise StorageError(f"cannot list {self.noun}s in {self._table!r}") from exc
            found += [self._read(item) for item in response.get("Items", [])]
            last = response.get("LastEvaluatedKey")
            if not last:
                return sorted(found, key=_name)
            request["ExclusiveStartKey"] = last

    def delete(self, name: str) -> bool:
        """Remove a registration; returns whether there was one."""
        try:
            response = self._client.delete_item(
                TableName=self._table,
                Key={"pk": {"S": self.pk(name)}, "sk": {"S": HEAD_SK}},
                ReturnValues="ALL_OLD",
            )
        except (ClientError, BotoCoreError) as exc:
            raise StorageError(f"cannot remove {self.noun} {name!r} from {self._table!r}") from exc
        return "Attributes" in response

    def _read(self, item: dict[str, Any]) -> R:
        return self.model.model_validate(json.loads(item["body"]["S"]))


def _name(registration: Any) -> str:
    """A registration's name (every registration model has one)."""
    return str(registration.name)
