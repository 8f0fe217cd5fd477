"""Calls released together on threads, for the tests of what concurrent writers may do."""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import TypeVar

T = TypeVar("T")


def at_once(calls: Sequence[Callable[[], T]]) -> list[T]:
    """Run each call on its own thread, all released together by a barrier, and wait for them.

    Returns:
        The calls' results, in the order they finished.

    Raises:
        BaseException: the first error a call raised (after every thread ended).
    """
    barrier = threading.Barrier(len(calls))
    lock = threading.Lock()
    results: list[T] = []
    errors: list[BaseException] = []

    def run(call: Callable[[], T]) -> None:
        barrier.wait()
        try:
            value = call()
        except BaseException as exc:  # re-raised in the test's thread below
            with lock:
                errors.append(exc)
            return
        with lock:
            results.append(value)

    threads = [threading.Thread(target=run, args=(call,)) for call in calls]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if errors:
        raise errors[0]
    return results
