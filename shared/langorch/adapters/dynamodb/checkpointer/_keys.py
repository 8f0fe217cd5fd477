"""Item keys and addresses of the checkpoint table, and the object keys of offloaded payloads.

``PK`` is the thread id. Unfenced, a checkpoint's ``SK`` is ``C#{ns}#{checkpoint_id}`` and its
writes' ``C#{ns}#{checkpoint_id}#W#{task_id}#{slot}``, with the namespace's ``%`` and ``#``
percent-escaped so ``C#{ns}#`` is a prefix of exactly one namespace's keys. Those keys also name
writes inside a fenced slot item (``..checkpoint_slots``), where they identify a write (a
buffered one replaces a stored one with the same key).
"""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

from langchain_core.runnables import RunnableConfig

from langorch.adapters.dynamodb.checkpoint_slots import escape_ns

Item = dict[str, Any]
"""A DynamoDB item in the low-level wire format (``{"PK": {"S": "..."}}``)."""
Items = list[Item]
Group = tuple[Item, list[Item]]
"""A checkpoint item and the items of its stored writes."""
Thread = tuple[str, str]
"""A thread id and a checkpoint namespace."""


def ns_prefix(ns: str) -> str:
    """The ``SK`` prefix of every item of one namespace."""
    return f"C#{escape_ns(ns)}#"


def checkpoint_sk(ns: str, checkpoint_id: str) -> str:
    """A checkpoint's ``SK``; its writes' keys start with it."""
    return f"{ns_prefix(ns)}{checkpoint_id}"


def write_sk(ns: str, checkpoint_id: str, task_id: str, slot: str) -> str:
    """The ``SK`` of a task's writes in one slot (``r`` regular, or a special channel's index)."""
    return f"{checkpoint_sk(ns, checkpoint_id)}#W#{task_id}#{slot}"


def text(item: Item, name: str) -> str:
    """A string attribute of an item."""
    return str(item[name]["S"])


def address(config: RunnableConfig) -> Thread:
    """The thread id and namespace a config addresses."""
    configurable = config["configurable"]
    return str(configurable["thread_id"]), str(configurable.get("checkpoint_ns") or "")


def runnable_config(thread_id: str, ns: str, checkpoint_id: str) -> RunnableConfig:
    """The config addressing one checkpoint."""
    return {
        "configurable": {
            "thread_id": thread_id,
            "checkpoint_ns": ns,
            "checkpoint_id": checkpoint_id,
        }
    }


def thread_object_prefix(key_prefix: str, thread_id: str) -> str:
    """The S3 prefix of every offloaded payload of a thread."""
    return f"{key_prefix}/{quote(thread_id, safe='')}/"


def checkpoint_object_key(key_prefix: str, thread_id: str, ns: str, checkpoint_id: str) -> str:
    """Where a checkpoint's payload is offloaded."""
    return f"{_namespace_base(key_prefix, thread_id, ns)}/{checkpoint_id}/checkpoint"


def writes_object_key(
    key_prefix: str, thread_id: str, ns: str, checkpoint_id: str, task_id: str, slot: str
) -> str:
    """Where a task's writes in one slot are offloaded."""
    base = _namespace_base(key_prefix, thread_id, ns)
    return f"{base}/{checkpoint_id}/writes/{quote(task_id, safe='')}/{slot}"


def _namespace_base(key_prefix: str, thread_id: str, ns: str) -> str:
    return f"{key_prefix}/{quote(thread_id, safe='')}/ns={quote(ns, safe='')}"
