"""Checkpoints stored as deltas: each item holds only what changed since its parent.

A checkpoint is cut into *fields*: each channel's value (``v:<channel>``), ``channel_versions``
(``cv``) and ``versions_seen`` (``vs``); the rest (id, ts, ...) is the *head*, stored whole. A
field whose value did not change since the parent checkpoint is not stored at all; one that
changed is stored as

* ``("m", changed, deleted, size)`` for a dict (string keys): the keys whose value changed or
  is new, and the keys gone;
* ``("a", appended, size)`` for a list that only grew at its end;
* ``("f", value)`` otherwise, and whenever the patches since the field's last whole value add
  up to more than :data:`SNAPSHOT_RATIO` times its size (a key rewritten in a loop), which
  bounds what a read must gather.

So a superstep writes what its steps changed, not the whole state: at 1 KB of new state per
step the bytes written per superstep stay flat as the state grows. A read gathers the items
from the oldest whole value still needed (the item's ``base``) up to the checkpoint, along
its parent links, and replays the patches. An item without ``dv`` is a whole checkpoint (the
format before deltas): it reads as it always did, and serves as a base for the deltas after it,
so a run started before deltas resumes.

Changes are found by comparing each key's (or element's) serialized bytes with the parent's,
never by identity or channel version, so a value changed in place, or a copied checkpoint whose
values differ under the same versions, is still stored.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, cast

from langgraph.checkpoint.base import Checkpoint

FULL, MERGE, APPEND = "f", "m", "a"
SNAPSHOT_RATIO = 4
"""A field is stored whole again once its patches since the last whole value exceed this many
times its size."""
_SPLIT = ("channel_values", "channel_versions", "versions_seen")

Dumps = Callable[[Any], bytes]
"""A value's serialized bytes (type tag included), for comparing with the parent's."""


@dataclass(frozen=True)
class FieldView:
    """What the saver remembers of one field of a stored checkpoint, to diff the next one."""

    kind: str
    """``dict`` (string keys), ``list`` or ``other``."""
    parts: Any
    """Serialized bytes: per key (dict), per element (list), or of the whole value."""
    base: str
    """The checkpoint whose item holds the field's last whole value."""
    chain: int
    """Bytes of the patches stored since then."""


@dataclass(frozen=True)
class View:
    """A stored checkpoint as the saver remembers it: its id and its fields' bytes."""

    checkpoint_id: str
    fields: Mapping[str, FieldView]

    @property
    def base(self) -> str:
        """The oldest checkpoint whose item a read of this one needs."""
        return min([self.checkpoint_id, *(f.base for f in self.fields.values())])


def fields_of(checkpoint: Checkpoint) -> dict[str, Any]:
    """A checkpoint's fields by name."""
    fields = {f"v:{channel}": value for channel, value in checkpoint["channel_values"].items()}
    fields["cv"] = checkpoint["channel_versions"]
    fields["vs"] = checkpoint["versions_seen"]
    return fields


def encode(
    checkpoint: Checkpoint,
    parent: View | None,
    dumps: Dumps,
    too_old: Callable[[str], bool] = lambda _: False,
) -> tuple[dict[str, Any], View]:
    """The delta payload of ``checkpoint`` against ``parent`` (``None``: everything whole),
    and the view of it to diff its child against. A field whose whole value lies in a
    checkpoint ``too_old`` says may expire soon (TTL) is stored whole again."""
    checkpoint_id = checkpoint["id"]
    deltas: dict[str, Any] = {}
    views: dict[str, FieldView] = {}
    for name, value in fields_of(checkpoint).items():
        old = parent.fields.get(name) if parent is not None else None
        # Every field is compared, whatever its version: a copied checkpoint (a fork, a redrive
        # with edits) keeps its source's versions while its values differ from the parent's.
        kind, parts = _parts(value, dumps)
        size = _size(kind, parts)
        patch = _patch(old, kind, parts, value) if old is not None else None
        if (
            patch is None
            or old is None
            or old.chain + patch[-1] > SNAPSHOT_RATIO * max(size, 1)
            or too_old(old.base)
        ):
            deltas[name] = (FULL, value)
            views[name] = FieldView(kind, parts, checkpoint_id, 0)
        elif patch[-1] or (patch[0] == MERGE and patch[2]):
            deltas[name] = patch
            views[name] = FieldView(kind, parts, old.base, old.chain + patch[-1])
        else:
            views[name] = FieldView(kind, parts, old.base, old.chain)  # changed back: nothing
    head = {key: value for key, value in checkpoint.items() if key not in _SPLIT}
    payload = {"h": head, "d": deltas, "k": list(checkpoint["channel_values"])}
    return payload, View(checkpoint_id, views)


def assemble(
    lineage: Iterable[tuple[str, Any, bool]], dumps: Dumps | None
) -> tuple[Checkpoint, View | None]:
    """The checkpoint at the end of ``lineage`` (oldest first: ``(id, payload, is_delta)``,
    starting at a whole value of every field it needs), and its view when ``dumps`` is given.
    """
    fields: dict[str, Any] = {}
    bases: dict[str, str] = {}
    chains: dict[str, int] = {}
    head: dict[str, Any] = {}
    present: list[str] = []
    checkpoint_id = ""
    for checkpoint_id, payload, delta in lineage:
        if not delta:  # a whole checkpoint, from before deltas
            fields = fields_of(payload)
            bases = dict.fromkeys(fields, checkpoint_id)
            chains = dict.fromkeys(fields, 0)
            head = {key: value for key, value in payload.items() if key not in _SPLIT}
            present = list(payload["channel_values"])
            continue
        for name, change in payload["d"].items():
            if change[0] == FULL:
                fields[name], bases[name], chains[name] = change[1], checkpoint_id, 0
            elif name not in fields:
                continue  # a patch on a value older than the lineage: a later whole one follows
            elif change[0] == MERGE:
                merged = {**fields[name], **change[1]}
                for key in change[2]:
                    merged.pop(key, None)
                fields[name], chains[name] = merged, chains[name] + change[3]
            else:
                fields[name], chains[name] = [*fields[name], *change[1]], chains[name] + change[2]
        head, present = payload["h"], payload["k"]
    whole = {
        **head,
        "channel_values": {channel: fields[f"v:{channel}"] for channel in present},
        "channel_versions": dict(fields["cv"]),
        "versions_seen": dict(fields["vs"]),
    }
    checkpoint = cast(Checkpoint, whole)
    if dumps is None:
        return checkpoint, None
    views: dict[str, FieldView] = {}
    for name, value in fields_of(checkpoint).items():
        kind, parts = _parts(value, dumps)
        views[name] = FieldView(kind, parts, bases[name], chains[name])
    return checkpoint, View(checkpoint_id, views)


def _parts(value: Any, dumps: Dumps) -> tuple[str, Any]:
    if isinstance(value, dict) and all(isinstance(key, str) for key in value):
        return "dict", {key: dumps(item) for key, item in value.items()}
    if isinstance(value, list):
        return "list", [dumps(item) for item in value]
    return "other", dumps(value)


def _size(kind: str, parts: Any) -> int:
    if kind == "dict":
        return sum(len(key) + len(part) for key, part in parts.items())
    if kind == "list":
        return sum(len(part) for part in parts)
    return len(parts)


def _patch(old: FieldView, kind: str, parts: Any, value: Any) -> tuple[Any, ...] | None:
    """The patch from ``old`` to ``value`` (its ``parts``), its size last; ``None``: whole."""
    if kind != old.kind:
        return None
    if kind == "dict":
        changed = [key for key, part in parts.items() if old.parts.get(key) != part]
        deleted = [key for key in old.parts if key not in parts]
        size = sum(len(key) + len(parts[key]) for key in changed) + sum(map(len, deleted))
        return (MERGE, {key: value[key] for key in changed}, deleted, size)
    if kind == "list":
        known = len(old.parts)
        if len(parts) < known or parts[:known] != old.parts:
            return None
        return (APPEND, value[known:], sum(len(part) for part in parts[known:]))
    return None


def written_at(checkpoint_id: str) -> float | None:
    """When a checkpoint was created (epoch seconds), from its id: LangGraph's ids are UUIDv6,
    whose first 15 hex digits past the version are a 100 ns count since 1582-10-15. ``None``
    for an id of another form."""
    digits = checkpoint_id.replace("-", "")
    if len(digits) != 32 or digits[12] != "6":
        return None
    try:
        ticks = int(digits[:12] + digits[13:16], 16)
    except ValueError:
        return None
    return (ticks - _GREGORIAN_TO_UNIX_TICKS) / 10_000_000


_GREGORIAN_TO_UNIX_TICKS = 0x01B21DD213814000
