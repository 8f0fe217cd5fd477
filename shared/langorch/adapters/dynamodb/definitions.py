"""Versioned, immutable block and workflow definitions in one DynamoDB table.

Table layout (``pk`` partition key, ``sk`` sort key, both strings; on-demand billing)::

    pk                  sk              attributes
    ------------------  --------------  ------------------------------------------------------------
    block#<id>          v#0000000001    kind, id, version (N), content_hash, created_at, category,
    block#<id>          v#0000000002      tags (L of S), body (the definition as JSON)
    block#<id>          head            the same attributes, copied from the latest version
    workflow#<id>       v#0000000001    ...
    workflow#<id>       head            ...

* A version item is written once (``attribute_not_exists``) and never changed: old runs keep
  the exact definition they started with.
* The head item carries the latest version *with its body*, so "latest" is one consistent
  ``GetItem`` and "list the latest of each" is one scan of the head items.
* A new version is one ``TransactWriteItems``: the version item (must not exist) plus the head
  (must still point at the version we read). A writer that lost the race re-reads the head
  and tries again; identical content (same ``content_hash()``) is a no-op.

Listing and searching scan the head items. The definitions table holds hundreds of items, not
millions, and scans can be strongly consistent where a GSI cannot.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from typing import Any, TypeVar, cast

from botocore.exceptions import BotoCoreError, ClientError
from pydantic import BaseModel

from langorch.adapters.stored_definitions import Kind, StoredDefinition
from langorch.domain.definitions import BlockDefinition, TaskPlan
from langorch.domain.errors import ConflictError, StorageError

HEAD_SK = "head"
VERSION_DIGITS = 10

_DefinitionT = TypeVar("_DefinitionT", BlockDefinition, TaskPlan)

# A version item is immutable: writing it again would rewrite history.
_VERSION_IS_NEW = "attribute_not_exists(pk)"
# The first version creates the head; every later one must replace the head we read, so two
# writers that both read version N cannot both become N+1.
_HEAD_IS_NEW = "attribute_not_exists(pk)"
_HEAD_IS_UNCHANGED = "#version = :previous_version"


def _utcnow() -> datetime:
    return datetime.now(UTC)


def pk_for(kind: Kind, definition_id: str) -> str:
    """The partition key of a definition: ``block#<id>`` or ``workflow#<id>``."""
    return f"{kind}#{definition_id}"


def sk_for(version: int) -> str:
    """The sort key of a version: zero-padded so versions sort numerically."""
    return f"v#{version:0{VERSION_DIGITS}d}"


class DefinitionsRepository:
    """Stores every version of every block and workflow; satisfies ``DefinitionLookup``.

    Args:
        client: a boto3 DynamoDB client (low-level).
        table_name: the definitions table.
        clock: returns the current time (injected so tests can fix ``created_at``).
        max_attempts: how often a put retries after losing a race to a concurrent writer.
    """

    def __init__(
        self,
        client: Any,
        table_name: str,
        *,
        clock: Callable[[], datetime] = _utcnow,
        max_attempts: int = 5,
    ) -> None:
        self._client = client
        self._table = table_name
        self._clock = clock
        self._max_attempts = max_attempts

    # ----------------------------------------------------------------------------------------
    # Setup
    # ----------------------------------------------------------------------------------------

    def create_table(self) -> None:
        """Create the table (tests and the local stack; CDK owns it in the cloud).

        An existing table is left as it is.
        """
        try:
            self._client.create_table(
                TableName=self._table,
                AttributeDefinitions=[
                    {"AttributeName": "pk", "AttributeType": "S"},
                    {"AttributeName": "sk", "AttributeType": "S"},
                ],
                KeySchema=[
                    {"AttributeName": "pk", "KeyType": "HASH"},
                    {"AttributeName": "sk", "KeyType": "RANGE"},
                ],
                BillingMode="PAY_PER_REQUEST",
            )
            self._client.get_waiter("table_exists").wait(TableName=self._table)
        except ClientError as exc:
            if _error_code(exc) == "ResourceInUseException":
                return
            raise self._storage_error("create table", exc) from exc
        except BotoCoreError as exc:
            raise self._storage_error("create table", exc) from exc

    # ----------------------------------------------------------------------------------------
    # Writes
    # ----------------------------------------------------------------------------------------

    def put_block(self, block: BlockDefinition) -> tuple[BlockDefinition, bool]:
        """Store a block: a new version when its content changed, else nothing.

        Args:
            block: the block; its ``version`` is ignored (the store assigns it).

        Returns:
            The stored block (with its version) and whether a new version was written.

        Raises:
            ConflictError: concurrent writers kept winning for ``max_attempts`` tries.
            StorageError: DynamoDB failed.
        """
        stored, created = self._put("block", block.block_id, block)
        return stored.definition, created

    def put_workflow(self, plan: TaskPlan) -> tuple[TaskPlan, bool]:
        """Store a workflow: a new version when its content changed, else nothing.

        Args:
            plan: the workflow; its ``version`` is ignored (the store assigns it).

        Returns:
            The stored workflow (with its version) and whether a new version was written.

        Raises:
            ConflictError: concurrent writers kept winning for ``max_attempts`` tries.
            StorageError: DynamoDB failed.
        """
        stored, created = self._put("workflow", plan.plan_id, plan)
        return stored.definition, created

    def _put(
        self, kind: Kind, definition_id: str, definition: _DefinitionT
    ) -> tuple[StoredDefinition[_DefinitionT], bool]:
        content_hash = definition.content_hash()
        model = type(definition)
        for _ in range(self._max_attempts):
            head = self._get_item(kind, definition_id, HEAD_SK, model)
            if head is not None and head.content_hash == content_hash:
                return head, False
            version = 1 if head is None else head.version + 1
            stored = StoredDefinition(
                kind=kind,
                id=definition_id,
                version=version,
                content_hash=content_hash,
                created_at=self._clock(),
                definition=definition.model_copy(update={"version": version}),
            )
            if self._write_version(stored, previous=None if head is None else head.version):
                return stored, True
        raise ConflictError(
            f"{kind} {definition_id}: {self._max_attempts} concurrent writers stored versions "
            "first; try again"
        )

    def _write_version(self, stored: StoredDefinition[Any], *, previous: int | None) -> bool:
        """One transaction: the new version item plus the head. False when a race was lost."""
        attributes = _to_item(stored)
        head_put: dict[str, Any] = {
            "TableName": self._table,
            "Item": {**attributes, "sk": {"S": HEAD_SK}},
        }
        if previous is None:
            head_put["ConditionExpression"] = _HEAD_IS_NEW
        else:
            head_put["ConditionExpression"] = _HEAD_IS_UNCHANGED
            head_put["ExpressionAttributeNames"] = {"#version": "version"}
            head_put["ExpressionAttributeValues"] = {":previous_version": {"N": str(previous)}}
        try:
            self._client.transact_write_items(
                TransactItems=[
                    {
                        "Put": {
                            "TableName": self._table,
                            "Item": attributes,
                            "ConditionExpression": _VERSION_IS_NEW,
                        }
                    },
                    {"Put": head_put},
                ]
            )
        except ClientError as exc:
            if _lost_race(exc):
                return False
            raise self._storage_error(f"store {stored.kind} {stored.id}", exc) from exc
        except BotoCoreError as exc:
            raise self._storage_error(f"store {stored.kind} {stored.id}", exc) from exc
        return True

    # ----------------------------------------------------------------------------------------
    # Reads
    # ----------------------------------------------------------------------------------------

    def get_block(self, block_id: str, version: int | None = None) -> BlockDefinition | None:
        """The block at ``version`` (``None``: the latest), or ``None`` when absent."""
        stored = self.get_stored("block", block_id, version)
        return None if stored is None else cast(BlockDefinition, stored.definition)

    def get_workflow(self, workflow_id: str, version: int | None = None) -> TaskPlan | None:
        """The workflow at ``version`` (``None``: the latest), or ``None`` when absent."""
        stored = self.get_stored("workflow", workflow_id, version)
        return None if stored is None else cast(TaskPlan, stored.definition)

    def get_stored(
        self, kind: Kind, definition_id: str, version: int | None = None
    ) -> StoredDefinition[Any] | None:
        """A stored version with its metadata (``None`` version: the latest), or ``None``."""
        sk = HEAD_SK if version is None else sk_for(version)
        return self._get_item(kind, definition_id, sk, _MODELS[kind])

    def list_blocks(self) -> list[BlockDefinition]:
        """The latest version of every block, by id."""
        return [cast(BlockDefinition, s.definition) for s in self.list_stored("block")]

    def list_workflows(self) -> list[TaskPlan]:
        """The latest version of every workflow, by id."""
        return [cast(TaskPlan, s.definition) for s in self.list_stored("workflow")]

    def list_stored(
        self,
        kind: Kind,
        *,
        category: str | None = None,
        tags: list[str] | None = None,
    ) -> list[StoredDefinition[Any]]:
        """The latest version of every definition of ``kind`` with metadata, sorted by id.

        Args:
            kind: ``"block"`` or ``"workflow"``.
            category: only definitions in this category.
            tags: only definitions carrying every one of these tags.
        """
        names = {"#sk": "sk", "#kind": "kind"}
        values: dict[str, Any] = {":head": {"S": HEAD_SK}, ":kind": {"S": kind}}
        clauses = ["#sk = :head", "#kind = :kind"]
        if category is not None:
            names["#category"] = "category"
            values[":category"] = {"S": category}
            clauses.append("#category = :category")
        for index, tag in enumerate(dict.fromkeys(tags or [])):
            names["#tags"] = "tags"
            values[f":tag{index}"] = {"S": tag}
            clauses.append(f"contains(#tags, :tag{index})")
        # Only head items, of this kind, matching every given filter.
        latest_matching = " AND ".join(clauses)
        items = self._paginate(
            "scan",
            TableName=self._table,
            FilterExpression=latest_matching,
            ExpressionAttributeNames=names,
            ExpressionAttributeValues=values,
            ConsistentRead=True,
        )
        stored = [_from_item(item, _MODELS[kind]) for item in items]
        return sorted(stored, key=lambda s: s.id)

    def search_blocks(
        self, category: str | None = None, tags: list[str] | None = None
    ) -> list[BlockDefinition]:
        """Latest blocks in ``category`` (if given) carrying all ``tags`` (if given)."""
        found = self.list_stored("block", category=category, tags=tags)
        return [cast(BlockDefinition, s.definition) for s in found]

    def versions(self, kind: Kind, definition_id: str) -> list[StoredDefinition[Any]]:
        """Every stored version of one definition, oldest first (empty when unknown)."""
        items = self._paginate(
            "query",
            TableName=self._table,
            KeyConditionExpression="pk = :pk AND begins_with(sk, :versions)",
            ExpressionAttributeValues={
                ":pk": {"S": pk_for(kind, definition_id)},
                ":versions": {"S": "v#"},
            },
            ConsistentRead=True,
        )
        return [_from_item(item, _MODELS[kind]) for item in items]

    # ----------------------------------------------------------------------------------------
    # I/O helpers
    # ----------------------------------------------------------------------------------------

    def _get_item(
        self, kind: Kind, definition_id: str, sk: str, model: type[_DefinitionT]
    ) -> StoredDefinition[_DefinitionT] | None:
        try:
            response = self._client.get_item(
                TableName=self._table,
                Key={"pk": {"S": pk_for(kind, definition_id)}, "sk": {"S": sk}},
                ConsistentRead=True,
            )
        except ClientError as exc:
            raise self._storage_error(f"read {kind} {definition_id}", exc) from exc
        except BotoCoreError as exc:
            raise self._storage_error(f"read {kind} {definition_id}", exc) from exc
        item = response.get("Item")
        return None if item is None else _from_item(item, model)

    def _paginate(self, operation: str, **request: Any) -> Iterator[dict[str, Any]]:
        call = getattr(self._client, operation)
        try:
            while True:
                response = call(**request)
                yield from response.get("Items", [])
                last_key = response.get("LastEvaluatedKey")
                if not last_key:
                    return
                request["ExclusiveStartKey"] = last_key
        except ClientError as exc:
            raise self._storage_error(f"{operation} definitions", exc) from exc
        except BotoCoreError as exc:
            raise self._storage_error(f"{operation} definitions", exc) from exc

    def _storage_error(self, action: str, exc: Exception) -> StorageError:
        if isinstance(exc, ClientError) and _error_code(exc) == "ResourceNotFoundException":
            return StorageError(
                f"cannot {action}: table {self._table!r} does not exist "
                "(is the stack deployed, or `langorch dev` running?)"
            )
        return StorageError(f"cannot {action} in table {self._table!r}: {exc}")


_MODELS: dict[Kind, type[Any]] = {"block": BlockDefinition, "workflow": TaskPlan}


def _error_code(exc: ClientError) -> str:
    return str(exc.response.get("Error", {}).get("Code", ""))


def _lost_race(exc: ClientError) -> bool:
    """True when a transaction was cancelled only because a condition no longer held."""
    if _error_code(exc) != "TransactionCanceledException":
        return False
    reasons = exc.response.get("CancellationReasons") or []
    codes = {str(reason.get("Code", "None")) for reason in reasons}
    # Without reasons (some emulators) a cancelled conditional transaction is still a race.
    return not codes or codes <= {"ConditionalCheckFailed", "None", "TransactionConflict"}


def _to_item(stored: StoredDefinition[Any]) -> dict[str, Any]:
    definition = cast(BaseModel, stored.definition)
    body = json.dumps(definition.model_dump(mode="json"), sort_keys=True, ensure_ascii=False)
    category = str(getattr(definition, "category", ""))
    tags = [str(tag) for tag in getattr(definition, "tags", [])]
    return {
        "pk": {"S": pk_for(stored.kind, stored.id)},
        "sk": {"S": sk_for(stored.version)},
        "kind": {"S": stored.kind},
        "id": {"S": stored.id},
        "version": {"N": str(stored.version)},
        "content_hash": {"S": stored.content_hash},
        "created_at": {"S": stored.created_at.isoformat()},
        "category": {"S": category},
        "tags": {"L": [{"S": tag} for tag in tags]},
        "body": {"S": body},
    }


def _from_item(item: dict[str, Any], model: type[_DefinitionT]) -> StoredDefinition[_DefinitionT]:
    kind = cast(Kind, item["kind"]["S"])
    definition = model.model_validate_json(item["body"]["S"])
    return StoredDefinition(
        kind=kind,
        id=item["id"]["S"],
        version=int(item["version"]["N"]),
        content_hash=item["content_hash"]["S"],
        created_at=datetime.fromisoformat(item["created_at"]["S"]),
        definition=definition,
    )
