"""Registered agents in the definitions table, beside the blocks, workflows and tools.

Layout (the definitions table's ``pk``/``sk``)::

    pk              sk     attributes
    --------------  -----  ---------------------------------------------------------------
    agent#<name>    head   kind = "agent", id, body (the AgentRegistration as JSON)

A registration has no versions: ``agents add`` again replaces it (a run reads it when a node
calls the agent). Its ``kind`` keeps it out of the block, workflow and tool listings, which
filter on ``kind``. The body holds secret ids only, never a secret's value.
"""

from __future__ import annotations

import json
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from langorch.domain.agents import AgentRegistration
from langorch.domain.errors import StorageError

KIND = "agent"
HEAD_SK = "head"


def agent_pk(name: str) -> str:
    """The partition key of a registered agent."""
    return f"{KIND}#{name}"


class AgentsRepository:
    """Registered agents in the definitions table; satisfies ``AgentStore``.

    Args:
        client: a boto3 DynamoDB client (low-level).
        table_name: the definitions table.
    """

    def __init__(self, client: Any, table_name: str) -> None:
        self._client = client
        self._table = table_name

    def put(self, agent: AgentRegistration) -> bool:
        """Store (or replace) a registration; returns whether it is new."""
        item = {
            "pk": {"S": agent_pk(agent.name)},
            "sk": {"S": HEAD_SK},
            "kind": {"S": KIND},
            "id": {"S": agent.name},
            "body": {"S": agent.model_dump_json()},
        }
        try:
            response = self._client.put_item(
                TableName=self._table, Item=item, ReturnValues="ALL_OLD"
            )
        except (ClientError, BotoCoreError) as exc:
            raise StorageError(f"cannot store agent {agent.name!r} in {self._table!r}") from exc
        return "Attributes" not in response

    def get(self, name: str) -> AgentRegistration | None:
        """The registration named ``name``, or ``None``."""
        try:
            response = self._client.get_item(
                TableName=self._table,
                Key={"pk": {"S": agent_pk(name)}, "sk": {"S": HEAD_SK}},
                ConsistentRead=True,
            )
        except (ClientError, BotoCoreError) as exc:
            raise StorageError(f"cannot read agent {name!r} from {self._table!r}") from exc
        item = response.get("Item")
        return None if item is None else _agent(item)

    def list(self) -> list[AgentRegistration]:
        """Every registration, by name."""
        request: dict[str, Any] = {
            "TableName": self._table,
            "FilterExpression": "#kind = :kind AND #sk = :head",
            "ExpressionAttributeNames": {"#kind": "kind", "#sk": "sk"},
            "ExpressionAttributeValues": {":kind": {"S": KIND}, ":head": {"S": HEAD_SK}},
            "ConsistentRead": True,
        }
        agents: list[AgentRegistration] = []
        while True:
            try:
                response = self._client.scan(**request)
            except (ClientError, BotoCoreError) as exc:
                raise StorageError(f"cannot list agents in {self._table!r}") from exc
            agents += [_agent(item) for item in response.get("Items", [])]
            last = response.get("LastEvaluatedKey")
            if not last:
                return sorted(agents, key=lambda a: a.name)
            request["ExclusiveStartKey"] = last

    def delete(self, name: str) -> bool:
        """Remove a registration; returns whether there was one."""
        try:
            response = self._client.delete_item(
                TableName=self._table,
                Key={"pk": {"S": agent_pk(name)}, "sk": {"S": HEAD_SK}},
                ReturnValues="ALL_OLD",
            )
        except (ClientError, BotoCoreError) as exc:
            raise StorageError(f"cannot remove agent {name!r} from {self._table!r}") from exc
        return "Attributes" in response


def _agent(item: dict[str, Any]) -> AgentRegistration:
    return AgentRegistration.model_validate(json.loads(item["body"]["S"]))
