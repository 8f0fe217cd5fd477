"""Versioned, immutable block and workflow definitions in the local store.

The same store as :class:`~langorch.adapters.dynamodb.definitions.DefinitionsRepository`, on
SQLite: one row per version, never changed once written, so old runs keep the exact definition
they started with. The latest version is the row with the highest number; there is no head row to
keep in step, because a new version is written inside one write transaction (``BEGIN IMMEDIATE``):
reading the latest, comparing its hash and inserting the next version happen with no other writer
in between, in this process or another. Two writers of changed content therefore always get two
different versions, and identical content (same ``content_hash()``) is a no-op.

The *active* version of a workflow (what runs start; ``get_workflow(id)``) is its row in
``active_versions`` (``version`` NULL: only drafts are stored); a workflow without a row is from
before drafts, and its latest version is active. A promotion sets the row and appends its record
to ``promotions`` in one write transaction.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable
from dataclasses import replace
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, TypeVar, cast

from langorch.adapters.sqlite._db import Database
from langorch.domain.errors import NotFoundError
from langorch.domain.promotions import Promotion
from langorch.domain.stored import Kind, StoredBody, StoredDefinition

if TYPE_CHECKING:
    from pydantic import BaseModel

    from langorch.domain.definitions import BlockDefinition, TaskPlan

SCHEMA = (
    "CREATE TABLE IF NOT EXISTS definitions ("
    " kind TEXT NOT NULL, id TEXT NOT NULL, version INTEGER NOT NULL,"
    " content_hash TEXT NOT NULL, created_at TEXT NOT NULL,"
    " category TEXT NOT NULL, tags TEXT NOT NULL, body TEXT NOT NULL,"
    " PRIMARY KEY (kind, id, version))",
    "CREATE TABLE IF NOT EXISTS active_versions ("
    " kind TEXT NOT NULL, id TEXT NOT NULL, version INTEGER, PRIMARY KEY (kind, id))",
    "CREATE TABLE IF NOT EXISTS promotions ("
    " workflow_id TEXT NOT NULL, seq INTEGER NOT NULL, body TEXT NOT NULL,"
    " PRIMARY KEY (workflow_id, seq))",
)
"""``tags`` is a JSON array (searched with ``json_each``), ``body`` the definition as JSON
(the DynamoDB item's ``body``, as that adapter writes it); a promotion's ``body`` is
:meth:`~langorch.domain.promotions.Promotion.to_dict` as JSON."""

# Every query reads the same columns, in the order _from_row takes them.
_SELECT_VERSION = (
    "SELECT kind, id, version, content_hash, created_at, body FROM definitions"
    " WHERE kind = ? AND id = ? AND version = ?"
)
_SELECT_LATEST = (
    "SELECT kind, id, version, content_hash, created_at, body FROM definitions"
    " WHERE kind = ? AND id = ? ORDER BY version DESC LIMIT 1"
)
_SELECT_VERSIONS = (
    "SELECT kind, id, version, content_hash, created_at, body FROM definitions"
    " WHERE kind = ? AND id = ? ORDER BY version"
)
# The newest version of each definition of a kind (no newer version of it exists), in the
# category when one is given (NULL: any), carrying every wanted tag (a JSON array: none of
# them missing from the definition's tags).
_SELECT_LATEST_MATCHING = (
    "SELECT kind, id, version, content_hash, created_at, body FROM definitions AS d"
    " WHERE d.kind = ?"
    " AND NOT EXISTS (SELECT 1 FROM definitions AS newer"
    "  WHERE newer.kind = d.kind AND newer.id = d.id AND newer.version > d.version)"
    " AND (? IS NULL OR d.category = ?)"
    " AND NOT EXISTS (SELECT 1 FROM json_each(?) AS wanted"
    "  WHERE wanted.value NOT IN (SELECT value FROM json_each(d.tags)))"
    " ORDER BY d.id"
)
_SELECT_ACTIVE = "SELECT version FROM active_versions WHERE kind = ? AND id = ?"
_SET_ACTIVE = (
    "INSERT INTO active_versions (kind, id, version) VALUES (?, ?, ?)"
    " ON CONFLICT (kind, id) DO UPDATE SET version = excluded.version"
)
_SELECT_PROMOTIONS = "SELECT body FROM promotions WHERE workflow_id = ? ORDER BY seq"
_INSERT_PROMOTION = (
    "INSERT INTO promotions (workflow_id, seq, body) VALUES"
    " (?, (SELECT COALESCE(MAX(seq), 0) + 1 FROM promotions WHERE workflow_id = ?), ?)"
)
_INSERT = (
    "INSERT INTO definitions (kind, id, version, content_hash, created_at, category, tags, body)"
    " VALUES (?, ?, ?, ?, ?, ?, ?, ?)"
)

_DefinitionT = TypeVar("_DefinitionT", "BlockDefinition", "TaskPlan")


def _utcnow() -> datetime:
    return datetime.now(UTC)


class SqliteDefinitions:
    """Every version of every block and workflow in the local store; satisfies
    ``DefinitionsStore``, ``WorkflowSource`` and ``DefinitionLookup``.

    Args:
        db: the home's database.
        clock: returns the current time (injected so tests can fix ``created_at``).
    """

    def __init__(self, db: Database, *, clock: Callable[[], datetime] = _utcnow) -> None:
        self._db = db
        self._clock = clock
        db.ensure_schema("definitions", SCHEMA)

    def create_table(self) -> None:
        """Create the table when missing (done on construction already; kept so the local
        stack's bootstrap treats this store as it treats the DynamoDB one)."""
        self._db.ensure_schema("definitions", SCHEMA)

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
            StorageError: SQLite failed.
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
            StorageError: SQLite failed.
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
            StorageError: SQLite failed.
        """
        workflow_id = promotion.workflow_id
        with self._db.write() as connection:
            exists = connection.execute(
                _SELECT_VERSION, ("workflow", workflow_id, promotion.version)
            ).fetchone()
            if exists is None:
                raise NotFoundError(f"workflow {workflow_id}@{promotion.version} not found")
            recorded = replace(
                promotion, previous_version=_active(connection, "workflow", workflow_id)
            )
            connection.execute(_SET_ACTIVE, ("workflow", workflow_id, promotion.version))
            connection.execute(
                _INSERT_PROMOTION,
                (workflow_id, workflow_id, json.dumps(recorded.to_dict(), sort_keys=True)),
            )
        return recorded

    def _put(
        self, kind: Kind, definition_id: str, definition: _DefinitionT, *, activate: bool = True
    ) -> tuple[StoredDefinition[_DefinitionT], bool]:
        content_hash = definition.content_hash()
        with self._db.write() as connection:
            latest = _latest(connection, kind, definition_id)
            if latest is not None and latest.content_hash == content_hash:
                return latest, False
            version = 1 if latest is None else latest.version + 1
            stored = StoredDefinition(
                kind=kind,
                id=definition_id,
                version=version,
                content_hash=content_hash,
                created_at=self._clock(),
                definition=definition.model_copy(update={"version": version}),
            )
            # A draft keeps the active version as it was (from before drafts: the latest).
            active = version if activate else _active(connection, kind, definition_id)
            connection.execute(_INSERT, _to_row(stored))
            connection.execute(_SET_ACTIVE, (kind, definition_id, active))
        return stored, True

    # ----------------------------------------------------------------------------------------
    # Reads
    # ----------------------------------------------------------------------------------------

    def get_block(self, block_id: str, version: int | None = None) -> BlockDefinition | None:
        """The block at ``version`` (``None``: the latest), or ``None`` when absent."""
        stored = self.get_stored("block", block_id, version)
        return None if stored is None else cast("BlockDefinition", stored.definition)

    def get_workflow(self, workflow_id: str, version: int | None = None) -> TaskPlan | None:
        """The workflow at ``version`` (``None``: the active one), or ``None`` when absent."""
        stored = self.get_stored("workflow", workflow_id, version)
        return None if stored is None else cast("TaskPlan", stored.definition)

    def get_stored(
        self, kind: Kind, definition_id: str, version: int | None = None
    ) -> StoredDefinition[Any] | None:
        """A stored version with its metadata (``None`` version: the active one, with its
        ``active_version``), or ``None``."""
        with self._db.read() as connection:
            if version is None:
                version = _active(connection, kind, definition_id)
                if version is None:
                    return None
                row = connection.execute(_SELECT_VERSION, (kind, definition_id, version)).fetchone()
                return None if row is None else replace(_from_row(row), active_version=version)
            row = connection.execute(_SELECT_VERSION, (kind, definition_id, version)).fetchone()
        return None if row is None else _from_row(row)

    def latest_version(self, kind: Kind, definition_id: str) -> int | None:
        """The newest stored version (active or a draft), or ``None`` when none is stored."""
        with self._db.read() as connection:
            latest = _latest(connection, kind, definition_id)
        return None if latest is None else latest.version

    def promotions(self, workflow_id: str) -> list[Promotion]:
        """Every promotion of a workflow, oldest first (empty when none)."""
        with self._db.read() as connection:
            rows = connection.execute(_SELECT_PROMOTIONS, (workflow_id,)).fetchall()
        return [Promotion.from_dict(json.loads(body)) for (body,) in rows]

    def list_blocks(self) -> list[BlockDefinition]:
        """The latest version of every block, by id."""
        return [cast("BlockDefinition", s.definition) for s in self.list_stored("block")]

    def list_workflows(self) -> list[TaskPlan]:
        """The active version of every workflow that has one, by id."""
        found = []
        for latest in self.list_stored("workflow"):
            if latest.active_version == latest.version:
                found.append(cast("TaskPlan", latest.definition))
            elif latest.active_version is not None:
                found.append(cast("TaskPlan", self.get_workflow(latest.id, latest.active_version)))
        return found

    def stored_workflows(self) -> list[StoredDefinition[TaskPlan]]:
        """Every stored workflow's latest version (active or a draft) with its
        ``active_version``, by id."""
        return cast("list[StoredDefinition[TaskPlan]]", self.list_stored("workflow"))

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
        rows, active = self._latest_matching(kind, category, tags)
        latest = [_from_row(row) for row in rows]
        # A definition with no row is from before drafts: its latest version is active.
        return [replace(s, active_version=active.get(s.id, s.version)) for s in latest]

    def list_bodies(
        self,
        kind: Kind,
        *,
        category: str | None = None,
        tags: list[str] | None = None,
    ) -> list[StoredBody]:
        """What :meth:`list_stored` lists, each definition as its stored JSON object: no
        definition model is imported or validated (a listing of a few fields needs none).

        Args:
            kind: ``"block"`` or ``"workflow"``.
            category: only definitions in this category.
            tags: only definitions carrying every one of these tags.
        """
        rows, active = self._latest_matching(kind, category, tags)
        latest = [_body_from_row(row) for row in rows]
        return [replace(s, active_version=active.get(s.id, s.version)) for s in latest]

    def _latest_matching(
        self, kind: Kind, category: str | None, tags: list[str] | None
    ) -> tuple[list[tuple[Any, ...]], dict[str, int | None]]:
        """The rows of the latest version of each matching definition, and the active version
        of each definition of ``kind`` that has an ``active_versions`` row."""
        wanted_tags = json.dumps(list(dict.fromkeys(tags or [])), ensure_ascii=False)
        with self._db.read() as connection:
            rows = connection.execute(
                _SELECT_LATEST_MATCHING, (kind, category, category, wanted_tags)
            ).fetchall()
            active = dict(
                connection.execute(
                    "SELECT id, version FROM active_versions WHERE kind = ?", (kind,)
                ).fetchall()
            )
        return rows, active

    def search_blocks(
        self, category: str | None = None, tags: list[str] | None = None
    ) -> list[BlockDefinition]:
        """Latest blocks in ``category`` (if given) carrying all ``tags`` (if given)."""
        found = self.list_stored("block", category=category, tags=tags)
        return [cast("BlockDefinition", s.definition) for s in found]

    def versions(self, kind: Kind, definition_id: str) -> list[StoredDefinition[Any]]:
        """Every stored version of one definition, oldest first (empty when unknown)."""
        with self._db.read() as connection:
            rows = connection.execute(_SELECT_VERSIONS, (kind, definition_id)).fetchall()
        return [_from_row(row) for row in rows]


def _latest(
    connection: sqlite3.Connection, kind: Kind, definition_id: str
) -> StoredDefinition[Any] | None:
    row = connection.execute(_SELECT_LATEST, (kind, definition_id)).fetchone()
    return None if row is None else _from_row(row)


def _active(connection: sqlite3.Connection, kind: Kind, definition_id: str) -> int | None:
    """The active version (``None``: only drafts, or nothing, is stored)."""
    row = connection.execute(_SELECT_ACTIVE, (kind, definition_id)).fetchone()
    if row is not None:
        return None if row[0] is None else int(row[0])
    latest = _latest(connection, kind, definition_id)  # from before drafts: the latest is active
    return None if latest is None else latest.version


def _to_row(stored: StoredDefinition[Any]) -> tuple[Any, ...]:
    definition = cast("BaseModel", stored.definition)
    body = json.dumps(definition.model_dump(mode="json"), sort_keys=True, ensure_ascii=False)
    tags = [str(tag) for tag in getattr(definition, "tags", [])]
    return (
        stored.kind,
        stored.id,
        stored.version,
        stored.content_hash,
        stored.created_at.isoformat(),
        str(getattr(definition, "category", "")),
        json.dumps(tags, ensure_ascii=False),
        body,
    )


def _from_row(row: tuple[Any, ...]) -> StoredDefinition[Any]:
    kind, definition_id, version, content_hash, created_at, body = row
    return StoredDefinition(
        kind=kind,
        id=definition_id,
        version=int(version),
        content_hash=content_hash,
        created_at=datetime.fromisoformat(created_at),
        definition=_model(kind).model_validate_json(body),
    )


def _body_from_row(row: tuple[Any, ...]) -> StoredBody:
    kind, definition_id, version, content_hash, created_at, body = row
    return StoredBody(
        kind=kind,
        id=definition_id,
        version=int(version),
        content_hash=content_hash,
        created_at=datetime.fromisoformat(created_at),
        body=json.loads(body),
    )


def _model(kind: Kind) -> type[BlockDefinition] | type[TaskPlan]:
    """The model a stored ``kind`` parses into. Imported on the first parse, not with this
    module: the listings (:meth:`SqliteDefinitions.list_bodies`) never build its schema."""
    from langorch.domain.definitions import BlockDefinition, TaskPlan

    return BlockDefinition if kind == "block" else TaskPlan
