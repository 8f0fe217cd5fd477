"""Each test module compiled by one pytest process, not by every xdist worker at once.

Every xdist worker collects the whole suite: it imports each test module, which pytest rewrites
(its assertions) and compiles, and which imports langorch and its libraries, compiled too. Both
write what they compiled to ``__pycache__``, so the second process to import a module reads it
for a fraction of the cost. In a fresh clone nothing is cached yet and ``make test``'s two
workers start together, walking the same files in the same order: each rewrote and compiled
nearly every module itself (~20 s of CPU per worker for the ~250 test modules and what they
import). Here a worker imports a test module holding a lock on that module (``flock`` on a file
in the module's ``__pycache__``), so the other worker waits for it and then reads the cache.
The workers still collect side by side (each usually holds a different module's lock); with a
warm cache the locks cost nothing. Nothing is locked when Python writes no byte code
(``PYTHONDONTWRITEBYTECODE``): there would be no cache to wait for.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import sys
from collections.abc import Iterator
from pathlib import Path


@contextlib.contextmanager
def importing_alone(module: Path) -> Iterator[None]:
    """Hold the lock on ``module``'s compilation while the caller imports it.

    Args:
        module: The test module's file.
    """
    if sys.dont_write_bytecode:
        yield
        return
    cache = module.parent / "__pycache__"
    try:
        cache.mkdir(exist_ok=True)
        descriptor = os.open(cache / f"{module.stem}.collect.lock", os.O_RDWR | os.O_CREAT)
    except OSError:  # a read-only checkout: Python caches nothing there either
        yield
        return
    try:
        fcntl.flock(descriptor, fcntl.LOCK_EX)
        yield
    finally:
        os.close(descriptor)  # releases the lock
