"""Indexed DynamoDB Query for the local emulator: read one partition, not the whole table.

moto answers every Query by listing *all* the table's items, sorting them (``Table.all_items``),
keeping the partition asked for, sorting that again and then walking to ``ExclusiveStartKey``
item by item — O(N log N) in the table's size for a page of 50. DynamoDB reads only the
partition, from the sort key on. Local runs, timelines and approvals accumulate in one table,
so every local Query grew slower with history: the console's runs page over 10,000 runs took
~1 s (eight Queries), and the pipeline's rounds slowed down one after another.

This keeps, for each table and index, the items of every partition in a list sorted by the
order moto sorts in (index sort key, then the table's keys) and answers a Query by bisecting
it: the key condition and ``ExclusiveStartKey`` become list positions, and only the page is
read. Filters, projections, ``Limit``, the 1 MB page and ``LastEvaluatedKey`` follow moto's
own rules, through moto's own code where it has one. The lists are brought up to date at the
next Query from the keys the writes touched (puts, updates, deletes, transactions, batches and
rolled-back transactions all report them), so a write costs one set insertion. Anything else —
legacy ``KeyConditions`` filters, multi-attribute keys, a key type other than S, N or B — goes
to moto's Query unchanged. ``tests/integration/test_indexed_query.py`` checks that random
tables, writes and queries answer as moto does.
"""

from __future__ import annotations

import threading
from bisect import bisect_left, bisect_right, insort
from collections.abc import Callable
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

Native = tuple[str, Any]
"""A key value as Python orders it: ("S", str), ("N", Decimal) or ("B", base64 text) — the
order moto's ``DynamoType`` comparisons give, at C speed."""

ItemKey = tuple[Native, Native | None]

_SYNC = threading.Lock()
"""Guards the lists: writes only mark keys; the first Query after them brings the lists up to
date. One lock for all tables: an update touches a few keys and takes microseconds."""

_ATTRIBUTE = "_langorch_partitions"
"""Where a table keeps its partitions (an attribute on moto's table object, so a table that is
copied or dropped takes them along)."""

_COMPARISONS = {
    "EQ": "EQ",
    "=": "EQ",
    "LT": "LT",
    "<": "LT",
    "LE": "LE",
    "<=": "LE",
    "GT": "GT",
    "GE": "GE",
    ">": "GT",
    ">=": "GE",
    "BETWEEN": "BETWEEN",
    "BEGINS_WITH": "BEGINS_WITH",
}


def _native(value: Any) -> Native | None:
    if value is None:
        return None
    kind = value.type
    if kind == "N":
        return ("N", Decimal(value.value))
    if kind in ("S", "B"):
        return (kind, value.value)
    return None


def _first(key: tuple[Any, ...]) -> Any:
    return key[0]


def _unsorted_index_order(key: ItemKey) -> Native | None:
    """Where moto puts an item in an index without a sort key: by the table's sort key (or
    hash key), as if it were the index's. DynamoDB promises no order there; moto's is kept."""
    return key[1] if key[1] is not None else key[0]


@dataclass
class _View:
    """The table or one of its indexes: partition value → sort keys, kept sorted.

    A sort key is ``(index sort value, table hash, table range)`` for an index and
    ``(table range,)`` for the table itself — moto's order, ties broken by the table's keys.
    """

    hash_attr: str
    range_attr: str | None
    is_index: bool
    partitions: dict[Native, list[tuple[Any, ...]]] = field(default_factory=dict)
    placed: dict[ItemKey, tuple[Native, tuple[Any, ...]]] = field(default_factory=dict)

    def place(self, key: ItemKey, item: Any) -> None:
        self.remove(key)
        if item is None:
            return
        partition = _native(item.attrs.get(self.hash_attr))
        if partition is None:
            return
        if self.is_index:
            if self.range_attr is None:
                sort_value = _unsorted_index_order(key)
            else:
                sort_value = _native(item.attrs.get(self.range_attr))
                if sort_value is None:
                    return  # DynamoDB leaves an item without the index's sort key out
            sort_key: tuple[Any, ...] = (sort_value, *key)
        else:
            sort_key = (key[1],)
        insort(self.partitions.setdefault(partition, []), sort_key)
        self.placed[key] = (partition, sort_key)

    def remove(self, key: ItemKey) -> None:
        where = self.placed.pop(key, None)
        if where is None:
            return
        partition, sort_key = where
        keys = self.partitions[partition]
        del keys[bisect_left(keys, sort_key)]
        if not keys:
            del self.partitions[partition]

    def item_key(self, partition: Native, sort_key: tuple[Any, ...]) -> ItemKey:
        if self.is_index:
            return (sort_key[1], sort_key[2])
        return (partition, sort_key[0])


@dataclass
class _Partitions:
    """A table's views and the item keys written since they were last brought up to date."""

    views: dict[str | None, _View]
    items: dict[ItemKey, Any] = field(default_factory=dict)
    touched: set[tuple[Any, Any]] = field(default_factory=set)


def _views_of(table: Any) -> dict[str | None, _View]:
    views: dict[str | None, _View] = {None: _View(table.hash_key_attr, table.range_key_attr, False)}
    for index in table.all_indexes():
        hashes = [k["AttributeName"] for k in index.schema if k["KeyType"] == "HASH"]
        ranges = [k["AttributeName"] for k in index.schema if k["KeyType"] == "RANGE"]
        if len(hashes) != 1 or len(ranges) > 1:
            continue  # multi-attribute keys: moto answers those
        views[index.name] = _View(hashes[0], ranges[0] if ranges else None, True)
    return views


def _partitions(table: Any) -> _Partitions:
    """The table's partitions, up to date with every write (built on the first Query)."""
    found: _Partitions | None = table.__dict__.get(_ATTRIBUTE)
    if found is None:
        found = _Partitions(_views_of(table))
        for item in _all_items(table):
            found.touched.add((item.hash_key, item.range_key))
        table.__dict__[_ATTRIBUTE] = found
    if found.touched:
        for hash_key, range_key in found.touched:
            key = (_native(hash_key), _native(range_key))
            if key[0] is None:
                continue
            item = _item_at(table, hash_key, range_key)
            if item is None:
                found.items.pop(key, None)  # type: ignore[arg-type]
            else:
                found.items[key] = item  # type: ignore[index]
            for view in found.views.values():
                view.place(key, item)  # type: ignore[arg-type]
        found.touched.clear()
    return found


def _all_items(table: Any) -> list[Any]:
    if table.range_key_attr is None:
        return list(table.items.values())
    return [item for hash_set in table.items.values() for item in hash_set.values()]


def _item_at(table: Any, hash_key: Any, range_key: Any) -> Any:
    """The item under a key, or None (``table.items`` is a defaultdict: never index it)."""
    current = table.items.get(hash_key)
    if current is None or table.range_key_attr is None:
        return current
    return current.get(range_key)


def touched(table: Any, hash_key: Any, range_key: Any) -> None:
    """Note a write to one item, for tables whose partitions are kept (else nothing to do)."""
    found: _Partitions | None = table.__dict__.get(_ATTRIBUTE)
    if found is not None:
        with _SYNC:
            found.touched.add((hash_key, range_key))


def _bounds(
    keys: list[tuple[Any, ...]], comparison: str | None, values: list[Native]
) -> tuple[int, int]:
    """Positions of the keys whose first element passes the key condition."""
    low, high = 0, len(keys)
    if comparison is None:
        return low, high
    first = values[0]
    if comparison == "EQ":
        return bisect_left(keys, first, key=_first), bisect_right(keys, first, key=_first)
    if comparison == "LT":
        return low, bisect_left(keys, first, key=_first)
    if comparison == "LE":
        return low, bisect_right(keys, first, key=_first)
    if comparison == "GT":
        return bisect_right(keys, first, key=_first), high
    if comparison == "GE":
        return bisect_left(keys, first, key=_first), high
    if comparison == "BETWEEN":
        return bisect_left(keys, first, key=_first), bisect_right(keys, values[1], key=_first)
    size = len(first[1])  # BEGINS_WITH, on strings (the plan sends moto anything else)

    def prefix(key: tuple[Any, ...]) -> Native:
        return (key[0][0], key[0][1][:size])

    return bisect_left(keys, first, key=prefix), bisect_right(keys, first, key=prefix)


@dataclass
class _Plan:
    view: _View
    partition: Native
    comparison: str | None
    values: list[Native]
    start: tuple[Any, ...] | None


def _plan(
    table: Any,
    index_name: str | None,
    hash_key: Any,
    hash_key_conditions: list[tuple[str, Any]] | None,
    range_key_conditions: list[tuple[str, str, list[Any]]] | None,
    range_comparison: str | None,
    range_objs: list[Any],
    exclusive_start_key: dict[str, Any] | None,
) -> tuple[_Partitions, _Plan] | None:
    """How to read the query from the sorted lists, or None for moto to answer it."""
    found = _partitions(table)
    if index_name not in found.views:
        return None
    view = found.views[index_name]
    if view.is_index:
        if not hash_key_conditions or len(hash_key_conditions) != 1:
            return None
        name, hash_value = hash_key_conditions[0]
        if name != view.hash_attr:
            return None
    else:
        hash_value = hash_key
    partition = _native(hash_value)
    if partition is None:
        return None
    if range_key_conditions and (
        len(range_key_conditions) != 1 or range_key_conditions[0][0] != view.range_attr
    ):
        return None
    comparison = None
    values: list[Native] = []
    if range_comparison:
        comparison = _COMPARISONS.get(range_comparison.upper())
        natives = [_native(v) for v in range_objs]
        if comparison is None or view.range_attr is None or None in natives:
            return None
        values = [v for v in natives if v is not None]
        if comparison == "BEGINS_WITH" and values[0][0] != "S":
            return None
    start = None
    if exclusive_start_key is not None:
        start = _start_key(table, view, exclusive_start_key)
        if start is None:
            return None
    return found, _Plan(view, partition, comparison, values, start)


def _start_key(table: Any, view: _View, start: dict[str, Any]) -> tuple[Any, ...] | None:
    from moto.dynamodb.models.dynamo_type import DynamoType

    def native(name: str | None) -> Native | None:
        raw = start.get(name) if name else None
        return _native(DynamoType(raw)) if isinstance(raw, dict) else None

    table_hash, table_range = native(table.hash_key_attr), native(table.range_key_attr)
    if table_hash is None or (table.range_key_attr is not None and table_range is None):
        return None
    if not view.is_index:
        return (table_range,)
    if view.range_attr is None:
        return (_unsorted_index_order((table_hash, table_range)), table_hash, table_range)
    sort_value = native(view.range_attr)
    if sort_value is None:
        return None
    return (sort_value, table_hash, table_range)


def _candidates(found: _Partitions, plan: _Plan, forward: bool, limit: int | None) -> list[Any]:
    """The items the page may read, in the order asked, from the key condition and the start.

    Called under ``_SYNC``.
    """
    keys = plan.view.partitions.get(plan.partition, [])
    low, high = _bounds(keys, plan.comparison, plan.values)
    if plan.start is not None:
        if forward:
            low = max(low, bisect_right(keys, plan.start))
        else:
            high = min(high, bisect_left(keys, plan.start))
    # One more than the page: moto reports LastEvaluatedKey only when an item is left.
    wanted = max(0, high - low if limit is None else min(high - low, limit + 1))
    chosen = keys[low : low + wanted] if forward else keys[high - wanted : high][::-1]
    return [found.items[plan.view.item_key(plan.partition, key)] for key in chosen]


def indexed_queries() -> Callable[[], None]:
    """Answer moto's Query from sorted partitions; see the module's docstring.

    Returns:
        A function that undoes the change.
    """
    import copy

    from moto.dynamodb.models import DynamoDBBackend
    from moto.dynamodb.models.table import RESULT_SIZE_LIMIT, Table

    original_query = Table.query
    original_put, original_delete = Table.put_item, Table.delete_item
    original_update = DynamoDBBackend.update_item

    def query(
        self: Any,
        hash_key: Any,
        range_comparison: str | None,
        range_objs: list[Any],
        limit: int,
        exclusive_start_key: dict[str, Any],
        scan_index_forward: bool,
        projection_expressions: list[list[str]] | None,
        index_name: str | None = None,
        consistent_read: bool = False,
        filter_expression: Any = None,
        hash_key_conditions: list[tuple[str, Any]] | None = None,
        range_key_conditions: list[tuple[str, str, list[Any]]] | None = None,
        **filter_kwargs: Any,
    ) -> tuple[list[Any], int, dict[str, Any] | None]:
        planned, candidates = None, []
        if not filter_kwargs and not (consistent_read and index_name):
            with _SYNC:  # one hold: the lists cannot change between the plan and the read
                planned = _plan(
                    self,
                    index_name,
                    hash_key,
                    hash_key_conditions,
                    range_key_conditions,
                    range_comparison,
                    range_objs,
                    exclusive_start_key,
                )
                if planned is not None:
                    forward = scan_index_forward is not False
                    candidates = _candidates(planned[0], planned[1], forward, limit)
        if planned is None:
            return original_query(  # type: ignore[no-any-return]
                self,
                hash_key,
                range_comparison,
                range_objs,
                limit,
                exclusive_start_key,
                scan_index_forward,
                projection_expressions,
                index_name,
                consistent_read,
                filter_expression,
                hash_key_conditions,
                range_key_conditions,
                **filter_kwargs,
            )
        results: list[Any] = []
        size = 0
        last_evaluated_key = None
        for item in candidates:
            if len(results) == limit or size + item.size() > RESULT_SIZE_LIMIT:
                last_evaluated_key = self._get_last_evaluated_key(results[-1], index_name)
                break
            results.append(item)
            size += item.size()
        scanned = len(results)
        results = copy.deepcopy(results)
        if index_name:
            index = self.get_index(index_name)
            results = [index.project(r) for r in results]
        if filter_expression is not None:
            results = [r for r in results if filter_expression.expr(r)]
        if projection_expressions:
            results = [r.project(projection_expressions) for r in results]
        return results, scanned, last_evaluated_key

    def put_item(self: Any, *args: Any, **kwargs: Any) -> Any:
        item = original_put(self, *args, **kwargs)
        touched(self, item.hash_key, item.range_key)
        return item

    def delete_item(self: Any, hash_key: Any, range_key: Any) -> Any:
        try:
            return original_delete(self, hash_key, range_key)
        finally:
            touched(self, hash_key, range_key)

    def update_item(
        self: Any, table_name: str, key: dict[str, Any], *args: Any, **kwargs: Any
    ) -> Any:
        try:
            return original_update(self, table_name, key, *args, **kwargs)
        finally:  # moto changes the item in place, possibly before it raises
            _touched_by_key(self, table_name, key)

    Table.query = query  # type: ignore[method-assign]
    Table.put_item = put_item  # type: ignore[method-assign]
    Table.delete_item = delete_item  # type: ignore[method-assign]
    DynamoDBBackend.update_item = update_item  # type: ignore[method-assign]

    def undo() -> None:
        Table.query = original_query  # type: ignore[method-assign]
        Table.put_item = original_put  # type: ignore[method-assign]
        Table.delete_item = original_delete  # type: ignore[method-assign]
        DynamoDBBackend.update_item = original_update  # type: ignore[method-assign]

    return undo


def _touched_by_key(backend: Any, table_name: str, key: dict[str, Any]) -> None:
    from moto.dynamodb.models.dynamo_type import DynamoType

    table = backend.tables.get(table_name)
    if table is None:
        return
    try:
        hash_key = DynamoType(key[table.hash_key_attr])
        range_key = None
        if table.range_key_attr is not None:
            range_key = DynamoType(key[table.range_key_attr])
    except (KeyError, TypeError):
        return  # a malformed key changed nothing
    touched(table, hash_key, range_key)
