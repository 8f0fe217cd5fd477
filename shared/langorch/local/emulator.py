"""Fixes to the AWS emulator (moto) so local mode keeps the promises the cloud keeps."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

_WRITES = ("put_item", "update_item", "delete_item", "transact_write_items")


def serialise_dynamodb_writes() -> Callable[[], None]:
    """Make moto apply each DynamoDB write atomically, as DynamoDB does.

    moto checks a write's condition and applies it as separate steps with no lock between
    them, so two threads can both pass ``attribute_not_exists(...)`` and both win (measured:
    two winners, sometimes with the same fence). DynamoDB serialises writes to an item; this
    restores that in the emulator only — our code is untouched, so code that read-then-wrote
    would still let both threads win.

    Returns:
        A function that undoes the change.
    """
    from moto.dynamodb.responses import DynamoHandler

    lock = threading.RLock()
    originals = {name: getattr(DynamoHandler, name) for name in _WRITES}
    for name, original in originals.items():

        def atomic(self: Any, _original: Any = original) -> Any:
            with lock:
                return _original(self)

        setattr(DynamoHandler, name, atomic)

    def undo() -> None:
        for name, original in originals.items():
            setattr(DynamoHandler, name, original)

    return undo
