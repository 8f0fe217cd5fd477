"""One SQLite file shared by every process of the local stack, and its transactions.

The local stack's sandboxes are processes, each with threads (LangGraph runs steps on a pool),
and every one of them reads and writes the same file. SQLite in WAL mode lets readers run beside
one writer across processes; a write transaction starts with ``BEGIN IMMEDIATE``, which takes
the file's write lock up front, so a read-check-write inside :meth:`Database.write` is atomic as
a DynamoDB condition expression is: nobody else writes between the check and the write.

Durability: ``synchronous=FULL``. A transaction is on disk (its WAL frames fsynced) before
``COMMIT`` returns, so nothing acknowledged is lost to ``kill -9`` or to a power cut.

Connections are per thread and per process (a connection must not cross a ``fork``), opened on
first use with ``busy_timeout``: a writer that finds the lock taken waits for it instead of
failing at once.

Writers queue on an advisory lock (``flock`` on ``<file>.write``) before ``BEGIN IMMEDIATE``.
SQLite's own busy handler polls, sleeping up to 100 ms between tries, so under contention a
waiter can miss every release for the whole timeout (seen: 100 simultaneous run starts on a
loaded machine, ``database is locked`` after 30 s); a blocked ``flock`` is woken by the release
itself. A holder is always inside one short transaction, and the kernel releases the lock of a
process that dies.
"""

from __future__ import annotations

import os
import sqlite3
import threading
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path

from langorch.domain.errors import LangorchError, StorageError

SCHEMA_VERSION = 1
"""The layout of the file (``PRAGMA user_version``). A file with a newer version is refused; an
older one is migrated by :meth:`Database.ensure_schema` (none exists yet)."""

BUSY_TIMEOUT_MS = 30_000
"""How long a writer waits for another process's write transaction before giving up."""

DATABASE_FILE = "langorch.db"
"""The file's name under the local stack's home."""


class SchemaVersionError(LangorchError):
    """The file was written by a newer langorch (its layout is unknown here)."""


class Database:
    """The SQLite file of one home: thread-local connections, transactions, schema.

    Args:
        path: the database file (created with its folder when missing).
    """

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._local = threading.local()
        self._schema_lock = threading.Lock()
        self._ready: set[str] = set()

    def __repr__(self) -> str:
        return f"Database({str(self.path)!r})"

    def connect(self) -> sqlite3.Connection:
        """A new connection to the file, set up as every connection here is (autocommit: the
        transactions are :meth:`write` and :meth:`read`'s own ``BEGIN``)."""
        try:
            connection = sqlite3.connect(
                self.path, timeout=BUSY_TIMEOUT_MS / 1000, isolation_level=None
            )
            connection.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
            connection.execute("PRAGMA journal_mode = WAL")
            connection.execute("PRAGMA synchronous = FULL")
        except sqlite3.Error as exc:
            raise StorageError(f"cannot open the local store {self.path}: {exc}") from exc
        return connection

    def connection(self) -> sqlite3.Connection:
        """This thread's connection (a new one after a ``fork``)."""
        local = self._local
        if getattr(local, "pid", None) != os.getpid():
            local.connection = self.connect()
            local.pid = os.getpid()
        connection: sqlite3.Connection = local.connection
        return connection

    @contextmanager
    def write(self) -> Iterator[sqlite3.Connection]:
        """A write transaction (``BEGIN IMMEDIATE``): committed when the block ends, rolled back
        when it raises. Nested uses join the outer transaction.

        Raises:
            StorageError: SQLite refused (the message says what, never the values written).
        """
        with self._transaction("BEGIN IMMEDIATE") as connection:
            yield connection

    @contextmanager
    def read(self) -> Iterator[sqlite3.Connection]:
        """A read transaction: every query in the block sees one snapshot of the file."""
        with self._transaction("BEGIN") as connection:
            yield connection

    def _write_lock(self) -> int:
        """This thread's descriptor of ``<file>.write`` (a new one after a ``fork``: a lock on
        a descriptor the parent opened would be the parent's).

        Held as a file object, not a bare descriptor: thread-local values are dropped when
        their thread ends, and a file object closes its descriptor then. A bare ``int`` kept
        one descriptor open per thread that ever wrote, for the life of the process (LangGraph
        runs steps on a pool whose threads come and go: a long-lived ``langorch dev`` would run
        out of descriptors)."""
        local = self._local
        if getattr(local, "lock_pid", None) != os.getpid():
            path = self.path.with_name(self.path.name + ".write")
            # Python opens files non-inheritable (PEP 446): a sandbox it starts never holds it.
            local.lock_file = open(path, "ab")  # noqa: SIM115 - lives as long as the thread
            local.lock_pid = os.getpid()
        fd: int = local.lock_file.fileno()
        return fd

    @contextmanager
    def _queued(self, begin: str) -> Iterator[None]:
        """In the writers' queue for the write lock (readers never wait)."""
        if begin != "BEGIN IMMEDIATE":
            yield
            return
        import fcntl

        fd = self._write_lock()
        fcntl.flock(fd, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)

    @contextmanager
    def _transaction(self, begin: str) -> Iterator[sqlite3.Connection]:
        connection = self.connection()
        if connection.in_transaction:  # joined by a nested use
            yield connection
            return
        with self._queued(begin):
            try:
                connection.execute(begin)
            except sqlite3.Error as exc:
                raise StorageError(
                    f"cannot start a transaction on {self.path.name}: {exc}"
                ) from exc
            try:
                yield connection
            except sqlite3.Error as exc:  # a statement the store did not expect to fail
                connection.rollback()
                raise StorageError(
                    f"the local store {self.path.name} refused a write: {exc}"
                ) from exc
            except BaseException:
                connection.rollback()
                raise
            try:
                connection.commit()
            except sqlite3.Error as exc:
                connection.rollback()
                raise StorageError(f"cannot commit to {self.path.name}: {exc}") from exc

    @contextmanager
    def setup_lock(self) -> Iterator[None]:
        """Held by one process at a time (an advisory lock on ``<file>.setup``): for setups
        that are not one transaction, such as LangGraph's ``SqliteStore`` migrations, which
        the first use in each process may run."""
        import fcntl

        with open(self.path.with_name(self.path.name + ".setup"), "a") as lock:
            fcntl.flock(lock.fileno(), fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(lock.fileno(), fcntl.LOCK_UN)

    def ensure_schema(self, name: str, statements: Iterable[str]) -> None:
        """Create one store's tables and indexes when missing (``CREATE … IF NOT EXISTS``),
        once per process, and stamp the file with :data:`SCHEMA_VERSION`.

        Args:
            name: the store (for the once-per-process check).
            statements: its ``CREATE TABLE IF NOT EXISTS`` / ``CREATE INDEX IF NOT EXISTS``.

        Raises:
            SchemaVersionError: the file was written by a newer langorch.
        """
        with self._schema_lock:
            if name in self._ready:
                return
            with self.write() as connection:
                version = int(connection.execute("PRAGMA user_version").fetchone()[0])
                if version > SCHEMA_VERSION:
                    raise SchemaVersionError(
                        f"{self.path} was written by a newer langorch (layout {version}, this "
                        f"one reads {SCHEMA_VERSION}): upgrade langorch, or use another home"
                    )
                for statement in statements:
                    connection.execute(statement)
                if version < SCHEMA_VERSION:
                    connection.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
            self._ready.add(name)

    def ensure_columns(self, table: str, columns: dict[str, str]) -> None:
        """Add the ``columns`` (name -> declaration) a table created by an older langorch lacks.

        For columns added since a table's first layout, each with a default, so a file written
        before them reads on (and an older langorch, which names its columns, writes on). Checked
        and added in one write transaction, so two processes never both add a column; once per
        process, as :meth:`ensure_schema` is.
        """
        with self._schema_lock:
            if f"{table}:columns" in self._ready:
                return
            with self.write() as connection:
                present = {row[1] for row in connection.execute(f"PRAGMA table_info({table})")}
                for name, declaration in columns.items():
                    if name not in present:
                        connection.execute(f"ALTER TABLE {table} ADD COLUMN {name} {declaration}")
            self._ready.add(f"{table}:columns")

    def close(self) -> None:
        """Close this thread's connection and lock file (others close with their threads)."""
        local = self._local
        connection = getattr(local, "connection", None)
        if connection is not None and getattr(local, "pid", None) == os.getpid():
            connection.close()
        lock_file = getattr(local, "lock_file", None)
        if lock_file is not None and getattr(local, "lock_pid", None) == os.getpid():
            lock_file.close()
        self._local = threading.local()
