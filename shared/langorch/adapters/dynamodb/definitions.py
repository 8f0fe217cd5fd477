"""Versioned, immutable block and workflow definitions in one DynamoDB table.

Table layout (``pk`` partition key, ``sk`` sort key, both strings; on-demand billing)::

    pk                  sk              attributes
    ------------------  --------------  ------------------------------------------------------------
    block#<id>          v#0000000001    kind, id, version (N), content_hash, created_at, category,
    block#<id>          v#0000000002      tags (L of S), body (the definition as JSON)
    block#<id>          head            the same attributes, copied from the latest version, plus
                                        active (N: the version runs start; 0: none) and
                                        revision (N: one more on every write of the head)
    workflow#<id>       v#0000000001    ...
    workflow#<id>       head            ...
    workflow#<id>       promotion#<rev> body (a Promotion as JSON), written with the head's revision

* A version item is written once (``attribute_not_exists``) and never changed: old runs keep
  the exact definition they started with.
* The head item carries the latest version *with its body*, so "latest" is one consistent
  ``GetItem`` and "list the latest of each" is one scan of the head items.
* A new version is one ``TransactWriteItems``: the version item (must not exist) plus the head
  (must still be at the revision we read). A writer that lost the race re-reads the head
  and tries again; identical content (same ``content_hash()``) is a no-op.
* The *active* version (what runs start; ``get_workflow(id)``) is the head's ``active``: a put
  makes its new version active unless it is a draft; a promotion sets it and writes its record
  in one transaction, conditional on the head's revision, so of a promotion and a concurrent put
  or promotion neither is lost: the loser re-reads and tries again. A head written before
  promotions existed has neither attribute: its latest version is active.

Listing and searching scan the head items. The definitions table holds hundreds of items, not
millions, and scans can be strongly consistent where a GSI cannot.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any, TypeVar, cast

from botocore.exceptions import BotoCoreError, ClientError
from pydantic import BaseModel

from langorch.domain.definitions import BlockDefinition, TaskPlan
from langorch.domain.errors import ConflictError, NotFoundError, StorageError
from langorch.domain.promotions import Promotion
from langorch.domain.stored import Kind, StoredBody, StoredDefinition

HEAD_SK = "head"
PROMOTION_PREFIX = "promotion#"
VERSION_DIGITS = 10
NO_ACTIVE = 0
"""The head's ``active`` when only drafts are stored."""

_DefinitionT = TypeVar("_DefinitionT", BlockDefinition, TaskPlan)

# A version item is immutable: writing it again would rewrite history.
_VERSION_IS_NEW = "attribute_not_exists(pk)"
# The first version creates the head; every later write must replace the head we read (its
# revision; a head from before revisions by its version), so two writers that both read
# version N cannot both become N+1, and a promotion and a put cannot undo each other.
_HEAD_IS_NEW = "attribute_not_exists(pk)"
_HEAD_IS_UNCHANGED = "#revision = :revision"
_LEGACY_HEAD_IS_UNCHANGED = "attribute_not_exists(#revision) AND #version = :previous_version"
_PROMOTION_IS_NEW = "attribute_not_exists(pk)"


@dataclass(frozen=True)
class _Head:
    """The head item: the latest version, the active one and the head's revision."""

    latest: StoredDefinition[Any]
    active: int | None
    revision: int
    legacy: bool
    """Written before heads had a revision (its latest version is active)."""

    def condition(self) -> dict[str, Any]:
        """The condition that the head is still this one (for a transaction's write)."""
        if self.legacy:
            return {
                "ConditionExpression": _LEGACY_HEAD_IS_UNCHANGED,
                "ExpressionAttributeNames": {"#revision": "revision", "#version": "version"},
                "ExpressionAttributeValues": {":previous_version": {"N": str(self.latest.version)}},
            }
        return {
            "ConditionExpression": _HEAD_IS_UNCHANGED,
            "ExpressionAttributeNames": {"#revision": "revision"},
            "ExpressionAttributeValues": {":revision": {"N": str(self.revision)}},
        }


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

    def put_workflow(self, plan: TaskPlan, *, activate: bool = True) -> tuple[TaskPlan, bool]:
        """Store a workflow: a new version when its content changed, else nothing.

        Args:
            plan: the workflow; its ``version`` is ignored (the store assigns it).
            activate: make a new version the active one (``False``: a draft, for
                :meth:`promote`); identical content changes nothing either way.

        Returns:
            The stored workflow (with its version) and whether a new version was written.

        Raises:
            ConflictError: concurrent writers kept winning for ``max_attempts`` tries.
            StorageError: DynamoDB failed.
        """
        stored, created = self._put("workflow", plan.plan_id, plan, activate=activate)
        return stored.definition, created

    def promote(self, promotion: Promotion) -> Promotion:
        """Make ``promotion.version`` the active version and keep the record, atomically.

        Args:
            promotion: who, when, the gate; its ``previous_version`` is set here to the version
                this write replaced.

        Returns:
            The promotion as recorded.

        Raises:
            NotFoundError: no such workflow or version.
            ConflictError: concurrent writers kept winning for ``max_attempts`` tries.
            StorageError: DynamoDB failed.
        """
        workflow_id = promotion.workflow_id
        for _ in range(self._max_attempts):
            head = self._get_head("workflow", workflow_id)
            if head is None or not 1 <= promotion.version <= head.latest.version:
                raise NotFoundError(f"workflow {workflow_id}@{promotion.version} not found")
            recorded = replace(promotion, previous_version=head.active)
            revision = head.revision + 1
            condition = head.condition()
            update = {
                "TableName": self._table,
                "Key": _key("workflow", workflow_id, HEAD_SK),
                "UpdateExpression": "SET #active = :active, #revision = :next",
                **condition,
                "ExpressionAttributeNames": {
                    **condition["ExpressionAttributeNames"],
                    "#active": "active",
                    "#revision": "revision",
                },
                "ExpressionAttributeValues": {
                    **condition["ExpressionAttributeValues"],
                    ":active": {"N": str(promotion.version)},
                    ":next": {"N": str(revision)},
                },
            }
            record = {
                **_key("workflow", workflow_id, f"{PROMOTION_PREFIX}{revision:0{VERSION_DIGITS}d}"),
                "body": {"S": json.dumps(recorded.to_dict(), sort_keys=True)},
            }
            items = [
                {"Update": update},
                {
                    "Put": {
                        "TableName": self._table,
                        "Item": record,
                        "ConditionExpression": _PROMOTION_IS_NEW,
                    }
                },
            ]
            if self._transact(items, f"promote workflow {workflow_id}"):
                return recorded
        raise ConflictError(
            f"workflow {workflow_id}: {self._max_attempts} concurrent writers changed it first; "
            "try again"
        )

    def _put(
        self, kind: Kind, definition_id: str, definition: _DefinitionT, *, activate: bool = True
    ) -> tuple[StoredDefinition[_DefinitionT], bool]:
        content_hash = definition.content_hash()
        for _ in range(self._max_attempts):
            head = self._get_head(kind, definition_id)
            if head is not None and head.latest.content_hash == content_hash:
                return cast(StoredDefinition[_DefinitionT], head.latest), False
            version = 1 if head is None else head.latest.version + 1
            stored = StoredDefinition(
                kind=kind,
                id=definition_id,
                version=version,
                content_hash=content_hash,
                created_at=self._clock(),
                definition=definition.model_copy(update={"version": version}),
            )
            kept = NO_ACTIVE if head is None or head.active is None else head.active
            if self._write_version(stored, head, active=version if activate else kept):
                return stored, True
        raise ConflictError(
            f"{kind} {definition_id}: {self._max_attempts} concurrent writers stored versions "
            "first; try again"
        )

    def _write_version(
        self, stored: StoredDefinition[Any], head: _Head | None, *, active: int
    ) -> bool:
        """One transaction: the new version item plus the head. False when a race was lost."""
        attributes = _to_item(stored)
        head_put: dict[str, Any] = {
            "TableName": self._table,
            "Item": {
                **attributes,
                "sk": {"S": HEAD_SK},
                "active": {"N": str(active)},
                "revision": {"N": str(1 if head is None else head.revision + 1)},
            },
        }
        if head is None:
            head_put["ConditionExpression"] = _HEAD_IS_NEW
        else:
            head_put.update(head.condition())
        items = [
            {
                "Put": {
                    "TableName": self._table,
                    "Item": attributes,
                    "ConditionExpression": _VERSION_IS_NEW,
                }
            },
            {"Put": head_put},
        ]
        return self._transact(items, f"store {stored.kind} {stored.id}")

    def _transact(self, items: list[dict[str, Any]], action: str) -> bool:
        """Write ``items`` in one transaction; False when a condition no longer held."""
        try:
            self._client.transact_write_items(TransactItems=items)
        except ClientError as exc:
            if _lost_race(exc):
                return False
            raise self._storage_error(action, exc) from exc
        except BotoCoreError as exc:
            raise self._storage_error(action, exc) from exc
        return True

    # ----------------------------------------------------------------------------------------
    # Reads
    # ----------------------------------------------------------------------------------------

    def get_block(self, block_id: str, version: int | None = None) -> BlockDefinition | None:
        """The block at ``version`` (``None``: the latest), or ``None`` when absent."""
        stored = self.get_stored("block", block_id, version)
        return None if stored is None else cast(BlockDefinition, stored.definition)

    def get_workflow(self, workflow_id: str, version: int | None = None) -> TaskPlan | None:
        """The workflow at ``version`` (``None``: the active one), or ``None`` when absent."""
        stored = self.get_stored("workflow", workflow_id, version)
        return None if stored is None else cast(TaskPlan, stored.definition)

    def get_stored(
        self, kind: Kind, definition_id: str, version: int | None = None
    ) -> StoredDefinition[Any] | None:
        """A stored version with its metadata (``None`` version: the active one, with its
        ``active_version``), or ``None``."""
        if version is not None:
            return self._get_item(kind, definition_id, sk_for(version), _MODELS[kind])
        head = self._get_head(kind, definition_id)
        return None if head is None else self._active(head.latest)

    def latest_version(self, kind: Kind, definition_id: str) -> int | None:
        """The newest stored version (active or a draft), or ``None`` when none is stored."""
        head = self._get_head(kind, definition_id)
        return None if head is None else head.latest.version

    def promotions(self, workflow_id: str) -> list[Promotion]:
        """Every promotion of a workflow, oldest first (empty when none)."""
        items = self._paginate(
            "query",
            TableName=self._table,
            KeyConditionExpression="pk = :pk AND begins_with(sk, :promotions)",
            ExpressionAttributeValues={
                ":pk": {"S": pk_for("workflow", workflow_id)},
                ":promotions": {"S": PROMOTION_PREFIX},
            },
            ConsistentRead=True,
        )
        return [Promotion.from_dict(json.loads(item["body"]["S"])) for item in items]

    def _active(self, latest: StoredDefinition[Any]) -> StoredDefinition[Any] | None:
        """The active version of a listed head (read when it is not the latest)."""
        if latest.active_version is None:
            return None
        if latest.active_version == latest.version:
            return latest
        stored = self._get_item(
            latest.kind, latest.id, sk_for(latest.active_version), _MODELS[latest.kind]
        )
        return None if stored is None else replace(stored, active_version=latest.active_version)

    def _get_head(self, kind: Kind, definition_id: str) -> _Head | None:
        item = self._read(kind, definition_id, HEAD_SK)
        if item is None:
            return None
        latest = _from_item(item, _MODELS[kind])
        return _Head(
            latest=latest,
            active=latest.active_version,
            revision=int(item["revision"]["N"]) if "revision" in item else 0,
            legacy="revision" not in item,
        )

    def list_blocks(self) -> list[BlockDefinition]:
        """The latest version of every block, by id."""
        return [cast(BlockDefinition, s.definition) for s in self.list_stored("block")]

    def list_workflows(self) -> list[TaskPlan]:
        """The active version of every workflow that has one, by id."""
        active = (self._active(s) for s in self.list_stored("workflow"))
        return [cast(TaskPlan, s.definition) for s in active if s is not None]

    def stored_workflows(self) -> list[StoredDefinition[TaskPlan]]:
        """Every stored workflow's latest version (active or a draft) with its
        ``active_version``, by id."""
        return cast(list[StoredDefinition[TaskPlan]], self.list_stored("workflow"))

    def list_stored(
        self,
        kind: Kind,
        *,
        category: str | None = None,
        tags: list[str] | None = None,
    ) -> list[StoredDefinition[Any]]:
        """The latest version of every definition of ``kind`` with metadata (and its
        ``active_version``), sorted by id.

        Args:
            kind: ``"block"`` or ``"workflow"``.
            category: only definitions in this category.
            tags: only definitions carrying every one of these tags.
        """
        stored = [_from_item(item, _MODELS[kind]) for item in self._heads(kind, category, tags)]
        return sorted(stored, key=lambda s: s.id)

    def list_bodies(
        self,
        kind: Kind,
        *,
        category: str | None = None,
        tags: list[str] | None = None,
    ) -> list[StoredBody]:
        """What :meth:`list_stored` lists, each definition as its stored JSON object (no
        definition model is validated).

        Args:
            kind: ``"block"`` or ``"workflow"``.
            category: only definitions in this category.
            tags: only definitions carrying every one of these tags.
        """
        stored = [_body_from_item(item) for item in self._heads(kind, category, tags)]
        return sorted(stored, key=lambda s: s.id)

    def _heads(
        self, kind: Kind, category: str | None, tags: list[str] | None
    ) -> Iterator[dict[str, Any]]:
        """The head items of ``kind`` in ``category`` carrying every tag of ``tags``."""
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
        return self._paginate(
            "scan",
            TableName=self._table,
            FilterExpression=latest_matching,
            ExpressionAttributeNames=names,
            ExpressionAttributeValues=values,
            ConsistentRead=True,
        )

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
        item = self._read(kind, definition_id, sk)
        return None if item is None else _from_item(item, model)

    def _read(self, kind: Kind, definition_id: str, sk: str) -> dict[str, Any] | None:
        try:
            response = self._client.get_item(
                TableName=self._table,
                Key=_key(kind, definition_id, sk),
                ConsistentRead=True,
            )
        except ClientError as exc:
            raise self._storage_error(f"read {kind} {definition_id}", exc) from exc
        except BotoCoreError as exc:
            raise self._storage_error(f"read {kind} {definition_id}", exc) from exc
        item: dict[str, Any] | None = response.get("Item")
        return item

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


def _key(kind: Kind, definition_id: str, sk: str) -> dict[str, Any]:
    return {"pk": {"S": pk_for(kind, definition_id)}, "sk": {"S": sk}}


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
    stored = _body_from_item(item)
    return StoredDefinition(
        kind=stored.kind,
        id=stored.id,
        version=stored.version,
        content_hash=stored.content_hash,
        created_at=stored.created_at,
        definition=model.model_validate_json(item["body"]["S"]),
        active_version=stored.active_version,
    )


def _body_from_item(item: dict[str, Any]) -> StoredBody:
    version = int(item["version"]["N"])
    # A version item says nothing of what is active; a head does (none: from before drafts).
    active = int(item["active"]["N"]) if "active" in item else None
    if item["sk"]["S"] == HEAD_SK:
        active = version if active is None else (None if active == NO_ACTIVE else active)
    return StoredBody(
        kind=cast(Kind, item["kind"]["S"]),
        id=item["id"]["S"],
        version=version,
        content_hash=item["content_hash"]["S"],
        created_at=datetime.fromisoformat(item["created_at"]["S"]),
        body=json.loads(item["body"]["S"]),
        active_version=active,
    )
