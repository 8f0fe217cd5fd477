"""Registered tools (MCP servers) in the definitions table, beside the blocks and workflows.

Layout (the definitions table's ``pk``/``sk``)::

    pk                  sk     attributes
    ------------------  -----  ----------------------------------------------------------
    toolserver#<name>   head   kind = "toolserver", id, body (the ToolServer as JSON)

A registration has no versions: ``tools add`` again replaces it (runs read it when a step
binds its tools). Its ``kind`` keeps it out of the block and workflow listings, which filter
on ``kind``. The body holds secret ids only, never a secret's value.
"""

from __future__ import annotations

import json
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from langorch.domain.errors import StorageError
from langorch.domain.tool_servers import ToolServer

KIND = "toolserver"
HEAD_SK = "head"


def tool_pk(name: str) -> str:
    """The partition key of a registered tool."""
    return f"{KIND}#{name}"


class ToolServersRepository:
    """Registered tools in the definitions table; satisfies ``ToolServerStore``.

    Args:
        client: a boto3 DynamoDB client (low-level).
        table_name: the definitions table.
    """

    def __init__(self, client: Any, table_name: str) -> None:
        self._client = client
        self._table = table_name

    def put(self, server: ToolServer) -> bool:
        """Store (or replace) a registration; returns whether it is new."""
        item = {
            "pk": {"S": tool_pk(server.name)},
            "sk": {"S": HEAD_SK},
            "kind": {"S": KIND},
            "id": {"S": server.name},
            "body": {"S": server.model_dump_json()},
        }
        try:
            response = self._client.put_item(
                TableName=self._table, Item=item, ReturnValues="ALL_OLD"
            )
        except (ClientError, BotoCoreError) as exc:
            raise StorageError(f"cannot store tool {server.name!r} in {self._table!r}") from exc
        return "Attributes" not in response

    def get(self, name: str) -> ToolServer | None:
        """The registration named ``name``, or ``None``."""
        try:
            response = self._client.get_item(
                TableName=self._table,
                Key={"pk": {"S": tool_pk(name)}, "sk": {"S": HEAD_SK}},
                ConsistentRead=True,
            )
        except (ClientError, BotoCoreError) as exc:
            raise StorageError(f"cannot read tool {name!r} from {self._table!r}") from exc
        item = response.get("Item")
        return None if item is None else _server(item)

    def list(self) -> list[ToolServer]:
        """Every registration, by name."""
        request: dict[str, Any] = {
            "TableName": self._table,
            "FilterExpression": "#kind = :kind AND #sk = :head",
            "ExpressionAttributeNames": {"#kind": "kind", "#sk": "sk"},
            "ExpressionAttributeValues": {":kind": {"S": KIND}, ":head": {"S": HEAD_SK}},
            "ConsistentRead": True,
        }
        servers: list[ToolServer] = []
        while True:
            try:
                response = self._client.scan(**request)
            except (ClientError, BotoCoreError) as exc:
                raise StorageError(f"cannot list tools in {self._table!r}") from exc
            servers += [_server(item) for item in response.get("Items", [])]
            last = response.get("LastEvaluatedKey")
            if not last:
                return sorted(servers, key=lambda s: s.name)
            request["ExclusiveStartKey"] = last

    def delete(self, name: str) -> bool:
        """Remove a registration; returns whether there was one."""
        try:
            response = self._client.delete_item(
                TableName=self._table,
                Key={"pk": {"S": tool_pk(name)}, "sk": {"S": HEAD_SK}},
                ReturnValues="ALL_OLD",
            )
        except (ClientError, BotoCoreError) as exc:
            raise StorageError(f"cannot remove tool {name!r} from {self._table!r}") from exc
        return "Attributes" in response


def _server(item: dict[str, Any]) -> ToolServer:
    return ToolServer.model_validate(json.loads(item["body"]["S"]))
