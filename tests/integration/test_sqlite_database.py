"""``Database``, the local stack's SQLite file: what it holds open for the life of a process."""

from __future__ import annotations

import os
import threading
from pathlib import Path

from langorch.adapters.sqlite._db import Database


def _descriptors_on(path: Path) -> int:
    """How many of this process's open descriptors point at ``path``."""
    count = 0
    for name in os.listdir("/proc/self/fd"):
        try:
            if os.readlink(f"/proc/self/fd/{name}") == str(path):
                count += 1
        except OSError:  # the descriptor listing itself, closed while we read
            continue
    return count


def test_a_thread_that_wrote_leaves_no_descriptor_open_when_it_ends(tmp_path: Path) -> None:
    # Given a home's database, written once from this thread
    db = Database(tmp_path / "langorch.db")
    with db.write() as connection:
        connection.execute("CREATE TABLE t (n INTEGER)")
    lock_file = tmp_path / "langorch.db.write"
    held_here = _descriptors_on(lock_file)

    # When twenty short-lived threads (LangGraph's step pool) each write once and end
    def write_once(n: int) -> None:
        with db.write() as connection:
            connection.execute("INSERT INTO t VALUES (?)", (n,))

    for n in range(20):
        worker = threading.Thread(target=write_once, args=(n,))
        worker.start()
        worker.join()

    # Then every write landed, and the threads' writer-lock descriptors closed with them
    with db.read() as connection:
        assert connection.execute("SELECT COUNT(*) FROM t").fetchone()[0] == 20
    assert _descriptors_on(lock_file) == held_here == 1

    # And closing the database releases this thread's descriptor too
    db.close()
    assert _descriptors_on(lock_file) == 0
