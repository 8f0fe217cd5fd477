"""Long-term memory for the local stack: LangGraph's ``SqliteStore`` on the home's database.

The store is ``langgraph.store.sqlite``'s ``SqliteStore`` (its own tables in the home's file:
``store`` and ``store_migrations``, created by its ``setup``), behind the same wrapper duties as
the DynamoDB store (:mod:`langorch.adapters.dynamodb.memory`), so memory behaves the same
locally and in the cloud:

- **numbers**: DynamoDB keeps numbers as decimals, finite and without an int/float distinction:
  a float that is not finite is refused with ``ValueError``, and a whole number reads back as an
  ``int``. The wrapper does the same here (JSON would otherwise store ``nan`` as ``null`` and
  read ``12.0`` back as a float).
- **errors**: a ``sqlite3.Error`` becomes a :class:`~langorch.domain.errors.StorageError`.

Connections: ``SqliteStore`` runs every call of a store on its one connection behind a lock.
Each thread here gets a store on its own connection of the
:class:`~langorch.adapters.sqlite._db.Database` (a new one after a ``fork``), so the threads of
a process, like its processes, share only the file. Async calls run in a worker thread.
"""

from __future__ import annotations

import asyncio
import math
import sqlite3
import threading
from collections.abc import Iterable
from typing import Any

from langgraph.store.base import BaseStore, Item, Op, PutOp, Result
from langgraph.store.sqlite import SqliteStore

from langorch.adapters.sqlite._db import Database
from langorch.domain.errors import StorageError


def _check_finite(value: Any, path: str = "value") -> None:
    if isinstance(value, float) and not math.isfinite(value):
        raise ValueError(f"{path}: {value} cannot be stored (memory numbers are finite)")
    if isinstance(value, dict):
        for key, item in value.items():
            _check_finite(item, f"{path}.{key}")
    elif isinstance(value, list | tuple):
        for index, item in enumerate(value):
            _check_finite(item, f"{path}[{index}]")


def _whole_numbers_as_int(value: Any) -> Any:
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, dict):
        return {key: _whole_numbers_as_int(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_whole_numbers_as_int(item) for item in value]
    return value


class _SqliteMemoryStore(BaseStore):
    """A ``BaseStore`` that runs each thread's operations on a ``SqliteStore`` of its own."""

    supports_ttl = SqliteStore.supports_ttl

    def __init__(self, db: Database) -> None:
        self._db = db
        self._local = threading.local()

    def batch(self, ops: Iterable[Op]) -> list[Result]:
        """Run the operations in one transaction of the home's database (``BaseStore``)."""
        encoded = [self._encode(op) for op in ops]
        try:
            results = self._store().batch(encoded)
        except sqlite3.Error as exc:
            raise StorageError(f"memory store on {self._db.path.name} failed: {exc}") from exc
        return [self._decode(result) for result in results]

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        """Async twin of :meth:`batch` (run in a worker thread)."""
        return await asyncio.to_thread(self.batch, list(ops))

    def setup(self) -> None:
        """Create ``SqliteStore``'s tables when missing (idempotent).

        Raises:
            StorageError: SQLite refused.
        """
        self._store()

    def _store(self) -> SqliteStore:
        """This thread's store, on this thread's connection (made again when it changed)."""
        connection = self._db.connection()
        local = self._local
        if getattr(local, "connection", None) is not connection:
            store = SqliteStore(connection)
            try:
                with self._db.setup_lock():  # its migrations are not one transaction
                    store.setup()
            except sqlite3.Error as exc:
                raise StorageError(f"cannot create the memory tables: {exc}") from exc
            local.store, local.connection = store, connection
        store_: SqliteStore = local.store
        return store_

    @staticmethod
    def _encode(op: Op) -> Op:
        if isinstance(op, PutOp) and op.value is not None:
            _check_finite(op.value)
        return op

    @staticmethod
    def _decode(result: Result) -> Result:
        if isinstance(result, Item):
            result.value = _whole_numbers_as_int(result.value)
        elif isinstance(result, list):
            for entry in result:
                if isinstance(entry, Item):
                    entry.value = _whole_numbers_as_int(entry.value)
        return result


def build_memory_store(db: Database) -> BaseStore:
    """The long-term memory store in the home's database (its tables created when missing).

    ``SqliteStore``'s migrations are statements of their own, not one transaction, so each
    process runs them under the database's setup lock (on a migrated file, ``setup`` only reads
    the version): any process may be the first to use a new file.

    Args:
        db: the home's database.

    Returns:
        A ``BaseStore`` for :class:`langorch.app.memory.MemoryManager` and the graph's
        ``store=``.

    Raises:
        SchemaVersionError: the file was written by a newer langorch.
        StorageError: the tables could not be created.
    """
    db.ensure_schema("memory", ())  # the file's layout version; the tables are SqliteStore's
    store = _SqliteMemoryStore(db)
    store.setup()  # now, not at the first read
    return store
