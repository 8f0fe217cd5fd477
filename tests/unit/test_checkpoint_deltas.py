"""The DynamoDB checkpointer's deltas (``_deltas``): what a checkpoint item stores of a child."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from langgraph.checkpoint.base import Checkpoint, empty_checkpoint

from langorch.adapters.dynamodb.checkpointer._deltas import FULL, MERGE, encode, written_at


def _dumps(value: Any) -> bytes:
    return repr(value).encode()


def _checkpoint(context: dict[str, str]) -> Checkpoint:
    checkpoint = empty_checkpoint()
    checkpoint["channel_values"] = {"shared_context": context}
    checkpoint["channel_versions"] = {"shared_context": len(context)}
    return checkpoint


def test_a_child_stores_only_the_keys_that_changed() -> None:
    # Given a stored checkpoint with two keys
    _, parent = encode(_checkpoint({"a": "1", "b": "2"}), None, _dumps)
    # When its child adds a third
    payload, _ = encode(_checkpoint({"a": "1", "b": "2", "c": "3"}), parent, _dumps)
    # Then only that key is stored
    assert payload["d"]["v:shared_context"][:3] == (MERGE, {"c": "3"}, [])


def test_a_child_of_a_checkpoint_near_its_expiry_stores_its_values_whole() -> None:
    # Given a stored checkpoint whose item the table's TTL may soon expire
    _, parent = encode(_checkpoint({"a": "1", "b": "2"}), None, _dumps)
    # When its child adds a key
    child = _checkpoint({"a": "1", "b": "2", "c": "3"})
    payload, view = encode(child, parent, _dumps, too_old=lambda _: True)
    # Then the child holds the whole value, so it outlives its parent's item
    assert payload["d"]["v:shared_context"] == (FULL, {"a": "1", "b": "2", "c": "3"})
    assert view.base == child["id"]


def test_a_checkpoint_id_tells_when_it_was_created() -> None:
    # Given RFC 9562's UUIDv6 example (LangGraph's ids are UUIDv6), and ids of another form
    example = "1EC9414C-232A-6B00-B3C8-9F6BDECED846"
    # Then its time reads back as the RFC gives it, 2022-02-22 19:22:22 UTC; the others none
    assert written_at(example.lower()) == datetime(2022, 2, 22, 19, 22, 22, tzinfo=UTC).timestamp()
    assert written_at("1") is None and written_at("not-a-uuid") is None
