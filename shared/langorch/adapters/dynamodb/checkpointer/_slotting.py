"""A fenced superstep's items packed into slot items, and unpacked again.

A superstep's buffered items (task writes, then the checkpoint they lead to; sometimes a held
input checkpoint first) become one slot item when they fit in one: the newest checkpoint's
attributes, with the writes in ``ws`` and any earlier checkpoint of the same write in ``pc``
(each without ``PK``, keeping the key it has in the unfenced layout, which identifies it). When
they do not fit (rare: payloads near the offload threshold), each checkpoint takes a slot of its
own, then the writes fill write-only slots: a write may land after a checkpoint, never before
the checkpoint it belongs to, so a newest-first read meets it first.
"""

from __future__ import annotations

from typing import Any

from langorch.adapters.dynamodb.checkpoint_slots import CHECKPOINT, WRITES
from langorch.adapters.dynamodb.checkpointer._keys import Item, Items, text

SLOT_BYTES = 380_000
"""A slot item stays under this estimate of its size (DynamoDB's limit is 400 KB; the margin
covers the estimate and the attributes a slot adds)."""


def pack(items: Items) -> Items:
    """The slot items (no ``SK`` or fence yet) that store ``items`` of one namespace, in order."""
    checkpoints = [item for item in items if text(item, "k") == CHECKPOINT]
    writes = [item for item in items if text(item, "k") != CHECKPOINT]
    if not checkpoints:
        return _write_slots(writes)
    whole = _slot(checkpoints[-1], checkpoints[:-1], writes)
    if item_size(whole) <= SLOT_BYTES:
        return [whole]
    return [_slot(checkpoint, [], []) for checkpoint in checkpoints] + _write_slots(writes)


def writes_in(slot: Item) -> Items:
    """The write items a slot item carries (as the unfenced layout keys them)."""
    return [{"PK": slot["PK"], **entry["M"]} for entry in slot.get("ws", {}).get("L", [])]


def checkpoints_in(slot: Item) -> Items:
    """The checkpoint items a slot item holds, oldest first, each keyed by the slot."""
    if text(slot, "k") != CHECKPOINT:
        return []
    earlier = [
        {**entry["M"], "PK": slot["PK"], "SK": slot["SK"]}
        for entry in slot.get("pc", {}).get("L", [])
    ]
    return [*earlier, slot]


def _slot(checkpoint: Item, earlier: Items, writes: Items) -> Item:
    slot = dict(checkpoint)
    slot.pop("SK", None)
    if earlier:
        slot["pc"] = {"L": [_entry(item) for item in earlier]}
    if writes:
        slot["ws"] = {"L": [_entry(item) for item in writes]}
    return slot


def _write_slots(writes: Items) -> Items:
    slots: Items = []
    batch: Items = []
    size = 0
    for item in writes:
        grown = size + item_size(item)
        if batch and grown > SLOT_BYTES:
            slots.append(_writes_slot(batch))
            batch, grown = [], item_size(item)
        batch.append(item)
        size = grown
    if batch:
        slots.append(_writes_slot(batch))
    return slots


def _writes_slot(writes: Items) -> Item:
    first = writes[0]
    slot = {
        "PK": first["PK"],
        "k": {"S": WRITES},
        "ns": first["ns"],
        "ws": {"L": [_entry(item) for item in writes]},
    }
    if "ttl" in first:
        slot["ttl"] = first["ttl"]  # expires with the writes it holds
    return slot


def _entry(item: Item) -> dict[str, Any]:
    return {"M": {name: value for name, value in item.items() if name != "PK"}}


def item_size(item: Item) -> int:
    """An estimate of an item's size as DynamoDB counts it: names plus values, in bytes."""
    return sum(len(name.encode()) + _value_size(value) for name, value in item.items())


def _value_size(value: dict[str, Any]) -> int:
    size = 0
    for kind, raw in value.items():
        if kind == "M":
            size += 3 + item_size(raw)
        elif kind == "L":
            size += 3 + sum(1 + _value_size(entry) for entry in raw)
        elif kind == "B":
            size += len(raw)
        else:
            size += len(str(raw).encode())
    return size
