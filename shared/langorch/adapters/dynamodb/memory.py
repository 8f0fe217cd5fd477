"""Long-term memory: LangGraph's ``BaseStore`` on DynamoDB (``langgraph-checkpoint-aws``).

The store is ``langgraph_checkpoint_aws``'s ``DynamoDBStore`` (table ``PK`` = namespace joined
with ``:``, ``SK`` = key; see its docs), wrapped in :class:`_JsonNumberStore`, which fixes two
things the library leaves to its callers:

- **numbers**: boto3's serializer refuses Python floats and the store hands numbers back as
  ``Decimal``. Memory values are JSON-like (preferences such as ``{"budget": 12.5}``, run
  summaries), and a ``Decimal`` in graph state or a template breaks JSON encoding. The wrapper
  stores floats as ``Decimal`` and returns ``int``/``float``.
- **errors**: a ``ClientError`` becomes a :class:`~langorch.domain.errors.StorageError` (habit 2).

Injected client (habit 2): ``DynamoDBStore`` cannot be given a client, only a session, region and
endpoint from which it builds one (a new session and client cost 100-300 ms, a cold start's
worth). It asks the session for exactly one thing, ``session.client("dynamodb", ...)``, so
:func:`build_memory_store` hands it a stand-in session that answers with the injected client.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from decimal import Decimal
from typing import Any

from botocore.exceptions import ClientError
from langgraph.store.base import BaseStore, Item, Op, PutOp, Result
from langgraph_checkpoint_aws.store.dynamodb import DynamoDBStore
from langgraph_checkpoint_aws.store.dynamodb.exceptions import TableCreationError

from langorch.domain.errors import StorageError


def _to_dynamodb(value: Any, path: str = "value") -> Any:
    if isinstance(value, bool):  # bool is an int: keep it before the number branch
        return value
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ValueError(f"{path}: {value} cannot be stored (DynamoDB numbers are finite)")
        return Decimal(repr(value))
    if isinstance(value, dict):
        return {k: _to_dynamodb(v, f"{path}.{k}") for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_to_dynamodb(v, f"{path}[{i}]") for i, v in enumerate(value)]
    return value


def _from_dynamodb(value: Any) -> Any:
    if isinstance(value, Decimal):
        # DynamoDB keeps no int/float distinction: integral numbers come back as int.
        return int(value) if value == value.to_integral_value() else float(value)
    if isinstance(value, dict):
        return {k: _from_dynamodb(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_from_dynamodb(v) for v in value]
    return value


class _JsonNumberStore(BaseStore):
    """A ``BaseStore`` over another that stores and returns plain JSON numbers."""

    def __init__(self, inner: Any, table_name: str) -> None:
        self._inner = inner
        self._table = table_name
        self.supports_ttl = bool(getattr(inner, "supports_ttl", False))

    @property
    def inner(self) -> Any:
        """The wrapped ``DynamoDBStore`` (for ``setup()`` and diagnostics)."""
        return self._inner

    def batch(self, ops: Iterable[Op]) -> list[Result]:
        """Run the operations on DynamoDB (``BaseStore`` contract)."""
        try:
            results = self._inner.batch([self._encode(op) for op in ops])
        except ClientError as exc:
            raise self._storage_error(exc) from exc
        return [self._decode(result) for result in results]

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        """Run the operations on DynamoDB, asynchronously (``BaseStore`` contract)."""
        try:
            results = await self._inner.abatch([self._encode(op) for op in ops])
        except ClientError as exc:
            raise self._storage_error(exc) from exc
        return [self._decode(result) for result in results]

    @staticmethod
    def _encode(op: Op) -> Op:
        if isinstance(op, PutOp) and op.value is not None:
            return op._replace(value=_to_dynamodb(op.value))
        return op

    @staticmethod
    def _decode(result: Result) -> Result:
        if isinstance(result, Item):
            result.value = _from_dynamodb(result.value)
        elif isinstance(result, list):
            for entry in result:
                if isinstance(entry, Item):
                    entry.value = _from_dynamodb(entry.value)
        return result

    def _storage_error(self, exc: ClientError) -> StorageError:
        error = exc.response.get("Error", {})
        return StorageError(
            f"memory store on {self._table} failed: {error.get('Code', '')} "
            f"{error.get('Message', '')}"
        )


def build_memory_store(client: Any, table_name: str) -> BaseStore:
    """The long-term memory store on ``table_name``, using ``client`` for every call.

    Args:
        client: a boto3 DynamoDB client (built by :func:`langorch.adapters.aws.make_client`).
        table_name: the memory table (``Settings.memory_table``).

    Returns:
        A ``BaseStore`` for :class:`langorch.app.memory.MemoryManager` and the graph's
        ``store=``.
    """
    return _build(client, table_name)


class _GivenClientSession:
    """Stands in for ``boto3.Session``: asked for a DynamoDB client, returns the injected one."""

    def __init__(self, client: Any) -> None:
        self._client = client

    def client(self, service_name: str, **_ignored: Any) -> Any:
        """The injected client; region, endpoint and config are already applied to it."""
        if service_name != "dynamodb":
            raise ValueError(f"the memory store asked for a {service_name} client")
        return self._client


def _build(client: Any, table_name: str) -> _JsonNumberStore:
    store = DynamoDBStore(table_name=table_name, boto3_session=_GivenClientSession(client))
    if store.client is not client:
        # A langgraph-checkpoint-aws release that builds its client differently must fail here,
        # not silently talk to another endpoint.
        raise RuntimeError("DynamoDBStore did not take the injected DynamoDB client")
    return _JsonNumberStore(store, table_name)


def create_memory_table(client: Any, table_name: str) -> None:
    """Create the memory table if it does not exist (tests and the local stack; CDK in AWS).

    The table is the one ``DynamoDBStore.setup()`` makes: ``PK``/``SK`` strings, on-demand.

    Raises:
        StorageError: the table could not be created.
    """
    try:
        _build(client, table_name).inner.setup()
    except (TableCreationError, ClientError) as exc:
        raise StorageError(f"could not create the memory table {table_name}: {exc}") from exc
