""":class:`DynamoCheckpointSaver`: the design is in the package docstring."""

from __future__ import annotations

import asyncio
import copy
import logging
import time
from collections import OrderedDict
from collections.abc import Iterable, Iterator, Sequence
from typing import TYPE_CHECKING, Any, Protocol

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    CheckpointTuple,
    get_checkpoint_id,
)
from langgraph.checkpoint.serde.base import SerializerProtocol

from langorch.adapters.dynamodb.checkpoint_slots import (
    CHECKPOINT,
    LEASE,
    PAUSE,
    WRITES,
    SlotClaims,
    slot_sk,
)
from langorch.adapters.dynamodb.checkpointer._buffer import FenceGroup, WriteBuffer
from langorch.adapters.dynamodb.checkpointer._deltas import View, assemble, encode, written_at
from langorch.adapters.dynamodb.checkpointer._fence import Fence
from langorch.adapters.dynamodb.checkpointer._keys import (
    Group,
    Item,
    Items,
    Thread,
    address,
    checkpoint_sk,
    runnable_config,
    text,
)
from langorch.adapters.dynamodb.checkpointer._payload import PayloadCodec
from langorch.adapters.dynamodb.checkpointer._slotting import checkpoints_in, pack
from langorch.adapters.dynamodb.checkpointer._table import CheckpointTable, Head
from langorch.adapters.dynamodb.checkpointer._threaded import ThreadedAsyncSaver
from langorch.domain.errors import LeaseLostError, NotFoundError, StorageError

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient
    from mypy_boto3_s3 import S3Client

logger = logging.getLogger(__name__)

_VIEWS_KEPT = 16
"""How many threads' newest checkpoints a saver keeps to diff the next put against. Each holds
its state twice (values and their bytes): a Lambda sandbox runs one segment at a time, and a
few hundred kilobytes of state times this must stay well inside its memory."""

_SLOT_ATTEMPTS = 32
"""Taken slots a fenced write steps over (markers: its own lease's, operators' pauses) before
it gives up."""


class RunFences(Protocol):
    """Where a run's current fence is read (the runs store: ``RunsRepository.fence_of``)."""

    def fence_of(self, run_id: str) -> int:
        """The run's fence (``NotFoundError`` for an unknown run)."""
        ...


_KINDS = {CHECKPOINT: "a checkpoint", WRITES: "writes", LEASE: "the lease marker"}

FENCE_KEY = "langorch_fence"
"""The ``configurable`` key a segment puts its lease's fence under (``engine.segments``)."""


class DynamoCheckpointSaver(ThreadedAsyncSaver):
    """A LangGraph checkpoint saver on DynamoDB: one request per superstep, consistent reads.

    Args:
        client: A boto3 DynamoDB client (injected; the saver never builds one).
        table_name: The checkpoints table (``PK``/``SK`` strings; see :meth:`setup`).
        s3_client: A boto3 S3 client for payloads too large for an item; without it and
            ``bucket``, such a payload fails with :class:`StorageError`.
        bucket: The bucket for offloaded payloads.
        key_prefix: Prefix of offloaded payload keys:
            ``{key_prefix}/{thread_id}/ns={ns}/{checkpoint_id}/...`` (URL-quoted parts).
        ttl_seconds: If set, every item carries ``ttl`` = write time + this, and :meth:`setup`
            enables DynamoDB TTL on it. Offloaded objects need a bucket lifecycle rule.
        offload_threshold_bytes: Payloads of this size or more (after compression) go to S3.
        compression_min_bytes: Payloads of this size or more are zlib-compressed when that
            saves at least 10 %; ``None`` disables compression.
        serde: The LangGraph serializer (default: LangGraph's ``JsonPlusSerializer``).
        runs_table: The runs table, whose run items carry the lease's ``fence``. With it, a
            config carrying ``configurable["langorch_fence"]`` has its writes fenced: each
            superstep is one conditional ``PutItem`` of the thread's next slot, and a segment
            that lost its lease gets :class:`LeaseLostError` with nothing written. A write that
            finds an operator's pause marker in its slot reports it (:meth:`pause_seen`).
            Without it, or without a fence in the config, writes are ``BatchWriteItem``.
        slots: The checkpoint slots' claims (shared with the runs repository, which claims a
            slot for an operator's pause); a saver builds its own without.
        fences: The runs store's ``fence_of``: asked once when a segment finds no lease
            marker of its own fence (its run's first lease writes none). Without it such a
            fence is trusted.
    """

    def __init__(
        self,
        client: DynamoDBClient,
        table_name: str,
        *,
        s3_client: S3Client | None = None,
        bucket: str | None = None,
        key_prefix: str = "checkpoints",
        ttl_seconds: int | None = None,
        offload_threshold_bytes: int = 350_000,
        compression_min_bytes: int | None = 4_096,
        serde: SerializerProtocol | None = None,
        runs_table: str | None = None,
        slots: SlotClaims | None = None,
        fences: RunFences | None = None,
    ) -> None:
        super().__init__(serde=serde)
        self.table = CheckpointTable(client, table_name)
        self.runs_table = runs_table
        self.slots = slots or SlotClaims(client, table_name)
        self.fences = fences
        self.codec = PayloadCodec(
            self.table,
            self.serde,
            s3_client,
            bucket,
            key_prefix.strip("/"),
            ttl_seconds,
            offload_threshold_bytes,
            compression_min_bytes,
        )
        self.buffer = WriteBuffer()
        # The newest checkpoint of each (thread, namespace) as this saver last read or wrote it
        # under a fence, with its stored writes: a segment holds its run's lease, so nobody
        # else writes the thread while that fence holds, and its second and later reads of the
        # same newest checkpoint (the state before the run, LangGraph's own read, the state
        # after) need no Query. Trusted under that fence and under the next one (the next
        # segment's lease, taken by nobody in between, e.g. our own resume after an interrupt
        # in this process); any write of the thread under an older fence, or unfenced,
        # forgets it. ``None``: the thread had no checkpoint (:meth:`starts_empty`).
        self._newest: dict[tuple[str, str], tuple[int, Group | None]] = {}
        self._writes_stored = 0  # counts stored writes: a read older than one is not kept
        # Runs whose fenced checkpoint write found an operator's pause (see pause_seen).
        self._paused: set[str] = set()
        # The newest checkpoint of each (thread, namespace) this saver stored or read, with
        # what its next put is diffed against (_deltas.View). A checkpoint never changes once
        # stored, so this needs no fence: a put uses it only when it is the put's parent.
        self._views: OrderedDict[Thread, tuple[View, Checkpoint]] = OrderedDict()
        # The keys of the items holding the checkpoints a thread's remembered view is built on
        # (its bases, and itself): a delta item names its base's key (``bsk``), so a read of
        # its lineage is one Query over a key range.
        self._sks: dict[Thread, dict[str, str]] = {}
        # The next free slot of each (thread, namespace) under a fence, as its segment knows it
        # (from a read, its own writes, or ``starts_empty``); and the (thread, fence) pairs found
        # to be stale, whose writes are refused without a request.
        self._cursors: dict[Thread, tuple[int, int]] = {}
        self._lost: set[tuple[str, int]] = set()

    def setup(self) -> None:
        """Create the table if it is missing (on-demand, ``PK``/``SK`` strings) and enable TTL.

        Raises:
            StorageError: DynamoDB refused a call.
        """
        self.table.create(ttl=self.codec.ttl_seconds is not None)

    def put(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        """Store a checkpoint, together with every buffered write, in one request.

        Args:
            config: Carries ``thread_id``, ``checkpoint_ns`` and the parent ``checkpoint_id``.
            checkpoint: The checkpoint to store: what changed since its parent when the saver
                knows the parent (it stored or read it last), else whole.
            metadata: Its metadata.
            new_versions: Unused: changes are found against the parent itself.

        Returns:
            The config addressing the stored checkpoint.

        Raises:
            LeaseLostError: the config's fence no longer holds the run's lease; nothing was
                written, and the segment's buffered writes are dropped.
            StorageError: DynamoDB or S3 refused the write (buffered writes stay buffered).
        """
        thread = address(config)
        parent_id = config["configurable"].get("checkpoint_id")
        with self.buffer.lock:
            known = self._views.get(thread)
        parent = known[0] if known and parent_id and known[0].checkpoint_id == parent_id else None
        payload, view = encode(checkpoint, parent, self._dumps, self._expiring)
        with self.buffer.lock:
            base_sk = self._sks.get(thread, {}).get(view.base)
        if view.base != checkpoint["id"] and base_sk is None:
            payload, view = encode(checkpoint, None, self._dumps)  # its base's item is unknown
        item = self.codec.checkpoint_item(config, checkpoint, metadata, (payload, view.base))
        if base_sk is not None and view.base != checkpoint["id"]:
            item["bsk"] = {"S": base_sk}
        fence = self._fence(config)
        group = self._group(fence)
        with self.buffer.lock:
            what = f"checkpoint {checkpoint['id']}"
            if fence is not None and metadata.get("source") == "input":
                # A run's input checkpoint waits for the next put (or a flush): only LangGraph's
                # __start__ task runs in between, which has no effect outside the graph, and a
                # segment that stops before storing it starts again from the same input (the
                # run record's). One request less per segment.
                self.buffer.hold(item, group)
            elif self._write(
                group, fence, [*self.buffer.items(group), item], what, checkpoint=True
            ):
                self._paused.add(thread[0])
            self.buffer.stored_checkpoint(thread, checkpoint["id"])
            self._remember(thread, view, checkpoint, {checkpoint["id"]: text(item, "SK")})
            if fence is not None:
                # The writes stored with it belong to its parent: the new one has none yet.
                self._newest[thread] = (fence.value, (item, []))
        return runnable_config(*thread, checkpoint["id"])

    def put_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        """Buffer a task's writes until the next :meth:`put` (or persist them now, see below).

        Persisted at once, with everything buffered, because no ``put()`` is coming to carry
        them: writes to ``__interrupt__``, ``__error__``, ``__resume__``, ``__scheduled__``,
        ``__pregel_push`` or the error-handler marker; writes of sibling tasks that finish after
        an interrupt or error on the same checkpoint; writes aimed at a checkpoint other than
        the newest one this saver stored in that namespace.

        Args:
            config: Addresses the checkpoint the writes belong to.
            writes: ``(channel, value)`` pairs.
            task_id: The task that produced them.
            task_path: The task's path, used to order pending writes.

        Raises:
            LeaseLostError: An immediate flush under the config's fence was refused: another
                segment owns the run (nothing written; the buffered writes are dropped).
            StorageError: An immediate flush failed (the writes stay buffered).
        """
        if not writes:
            return
        items = self.codec.write_items(config, writes, task_id, task_path)
        checkpoint_id = str(config["configurable"]["checkpoint_id"])
        fence = self._fence(config)
        group = self._group(fence)
        with self.buffer.lock:
            channels = [channel for channel, _ in writes]
            if self.buffer.add(address(config), checkpoint_id, channels, items, group):
                # Unfenced: everything unfenced goes, as always; fenced: this segment's group.
                self._write(group, fence, self.buffer.items(group), "pending writes")

    def flush(self) -> None:
        """Persist every buffered write now (no request when nothing is buffered).

        Call it when a graph run stops without a final ``put()`` for reasons LangGraph does
        not record as a write (e.g. the process is about to exit after an exception). Each
        fenced group is written under its own fence.

        Raises:
            LeaseLostError: a fenced group's lease was taken over (that group is dropped; the
                other groups are still written).
            StorageError: DynamoDB or S3 refused the write (the writes stay buffered).
        """
        lost: LeaseLostError | None = None
        with self.buffer.lock:
            for group in self.buffer.groups():
                fence = None if group is None else self._fence_of(*group)
                try:
                    self._write(group, fence, self.buffer.items(group), "pending writes")
                except LeaseLostError as exc:
                    lost = lost or exc
        if lost is not None:
            raise lost

    def _write(
        self,
        group: FenceGroup,
        fence: Fence | None,
        items: Items,
        what: str,
        *,
        checkpoint: bool = False,
    ) -> bool:
        """Store ``items`` (buffered ones of ``group`` included) and clear ``group``.

        Call with the buffer's lock held. A refused fence drops the group: its items can never
        be written, and they must not ride along with a newer segment's write.

        Returns:
            Whether a fenced write found an operator's pause marker in its slot.
        """
        if not items:
            return False
        self._writes_stored += 1
        known = self._forget(group)
        paused = False
        if fence is None:
            self.table.write_items(items, what=what)
        else:
            try:
                paused = self._write_slots(fence, items)
            except LeaseLostError:
                self.buffer.clear(group)
                raise
            logger.debug("stored %s (%d items, fence %d)", what, len(items), fence.value)
            self._newest.update(_with_writes(known, items, fence.value))
        self.buffer.clear(group)
        return paused

    def _write_slots(self, fence: Fence, items: Items) -> bool:
        """Store a fenced group's items in the thread's next slots, one ``PutItem`` each
        (one in all unless they outgrow an item); whether a pause marker was stepped over.

        A write lands only on a free slot. A taken slot holding a pause marker, or this
        lease's own marker, is stepped over; one holding anything else (a newer lease's marker
        or write) means the lease is lost: nothing more is written. A slot holding exactly the
        item sent is a retried request that had landed.

        Raises:
            LeaseLostError: a newer lease claimed the thread.
            StorageError: DynamoDB refused a write.
        """
        by_ns: dict[str, Items] = {}
        for item in items:
            by_ns.setdefault(text(item, "ns"), []).append(item)
        paused = False
        for ns, ns_items in by_ns.items():
            thread = (fence.run_id, ns)
            cursor = self._cursor(fence, ns)
            for slot in pack(ns_items):
                slot["f"] = {"N": str(fence.value)}
                cursor, stepped = self._put_slot(fence, ns, cursor, slot)
                paused = paused or stepped
                held = {text(c, "cid") for c in checkpoints_in(slot)}
                keys = self._sks.get(thread, {})
                for checkpoint in ns_items:
                    if text(checkpoint, "k") == CHECKPOINT and text(checkpoint, "cid") in held:
                        checkpoint["SK"] = slot["SK"]  # where it went: later reads key it
                        if text(checkpoint, "cid") in keys:
                            keys[text(checkpoint, "cid")] = text(slot, "SK")
                self._cursors[thread] = (fence.value, cursor)
            if not ns:
                self.slots.note_top(fence.run_id, cursor - 1)
        return paused

    def _put_slot(self, fence: Fence, ns: str, cursor: int, slot: Item) -> tuple[int, bool]:
        """Put ``slot`` in the first free slot from ``cursor``: the next cursor, and whether a
        pause marker was stepped over."""
        paused = False
        for _ in range(_SLOT_ATTEMPTS):
            slot["SK"] = {"S": slot_sk(ns, cursor)}
            taken = self.table.put_slot(slot)
            if taken is None or taken == slot:
                return cursor + 1, paused
            kind = taken.get("k", {}).get("S")
            taken_fence = int(taken.get("f", {}).get("N", "-1"))
            if kind == PAUSE:
                paused = True
            elif not (kind == LEASE and taken_fence == fence.value):
                self._lost.add((fence.run_id, fence.value))
                what = _KINDS.get(kind or "", "an item")
                raise fence.lost(f"slot {cursor} holds {what} of fence {taken_fence}")
            cursor += 1
        raise StorageError(
            f"run {fence.run_id}: {_SLOT_ATTEMPTS} checkpoint slots in a row were taken by "
            "markers (hint: an operator's pause is being asked in a loop; retry the segment)"
        )

    def _cursor(self, fence: Fence, ns: str) -> int:
        """The next free slot of a namespace as this fence's segment knows it: read (and the
        lease checked) on the segment's first write that did not read first."""
        if (fence.run_id, fence.value) in self._lost:
            raise fence.lost("a newer lease's marker was found by a read")
        known = self._cursors.get((fence.run_id, ns))
        if known is not None and known[0] == fence.value:
            return known[1]
        self._establish(fence, ns, self.table.read_head(fence.run_id, ns))
        if (fence.run_id, fence.value) in self._lost:
            raise fence.lost("a newer lease's marker was found by a read")
        return self._cursors[fence.run_id, ns][1]

    def _establish(self, fence: Fence, ns: str, head: Head) -> None:
        """Learn from a read of a namespace's slots where this fence's writes go, or that a
        newer lease took the run. Without a marker of its own fence (a run's first lease
        writes none, or a lease's marker was never written), the run item's fence decides;
        above 1 the segment then writes its own marker, so a stale segment is refused from
        now on rather than from this segment's first write."""
        if head.paused:
            self._paused.add(fence.run_id)
        cursor = head.top + 1
        if head.fence is None or head.fence < fence.value:
            current = fence.value if self.fences is None else self._run_fence(fence.run_id)
            if current != fence.value:
                self._lost.add((fence.run_id, fence.value))
                return
            if fence.value > 1:
                marker = {"PK": {"S": fence.run_id}, "ns": {"S": ns}, "k": {"S": LEASE}}
                marker["f"] = {"N": str(fence.value)}
                cursor, stepped = self._put_slot(fence, ns, cursor, marker)
                if stepped:
                    self._paused.add(fence.run_id)
        elif head.fence > fence.value:
            self._lost.add((fence.run_id, fence.value))
            return
        self._cursors[fence.run_id, ns] = (fence.value, cursor)
        if not ns:
            self.slots.note_top(fence.run_id, cursor - 1)

    def _run_fence(self, run_id: str) -> int | None:
        """The run's fence as the runs store has it (``None``: no such run)."""
        assert self.fences is not None
        try:
            return self.fences.fence_of(run_id)
        except NotFoundError:
            return None

    def claim_lease(self, run_id: str, fence: int) -> None:
        """A segment took the run's lease under ``fence``: put its marker in the thread's next
        slot, so the segment that held the lease before writes nothing more (from its next
        write on, not from this segment's first). The first lease (fence 1) claims nothing.

        Raises:
            StorageError: DynamoDB refused the write.
        """
        self.slots.claim_lease(run_id, fence)

    def claim_pause(self, run_id: str) -> None:
        """An operator asked the run to pause (the request stands on the run): put a pause
        marker in the thread's next slot, which the running segment's next write steps over
        and reports (:meth:`pause_seen`).

        Raises:
            StorageError: DynamoDB refused the write.
        """
        self.slots.claim_pause(run_id)

    def pause_seen(self, run_id: str) -> bool:
        """Whether a fenced checkpoint write (or read) of ``run_id`` found an operator's pause
        marker since the last call (which this call forgets).

        The segment asks at each step boundary instead of reading the run item: an operator's
        pause takes the thread's next slot, so the segment's next write finds it (and stores
        its superstep in the slot after); a pause costs no request until one is asked.
        """
        with self.buffer.lock:
            if run_id not in self._paused:
                return False
            self._paused.discard(run_id)
            return True

    def starts_empty(self, run_id: str, fence: int) -> None:
        """Note that the run's thread has no checkpoint yet, as its segment under ``fence``
        knows (the run's first lease, and no fork copied one into it): that segment's first
        read of the newest checkpoint needs no ``Query``, and its first write takes slot 1."""
        with self.buffer.lock:
            self._newest[run_id, ""] = (fence, None)
            if fence == 1:  # the first lease writes no marker: slot 1 is free
                self._cursors[run_id, ""] = (fence, 1)

    def _forget(self, group: FenceGroup) -> dict[Thread, tuple[int, Group | None]]:
        """Drop the remembered newest checkpoints a write to ``group`` may change; returns
        those of its thread (a fenced write that lands keeps them, with its writes added)."""
        if group is None:
            self._newest.clear()  # an unfenced write may touch any thread
            return {}
        dropped = {key: self._newest.pop(key) for key in list(self._newest) if key[0] == group[0]}
        return {key: known for key, known in dropped.items() if known[0] >= group[1] - 1}

    def _fence(self, config: RunnableConfig) -> Fence | None:
        """The fence a config's writes carry: none without a runs table or a fence in it."""
        value = config.get("configurable", {}).get(FENCE_KEY)
        if self.runs_table is None or value is None:
            return None
        return self._fence_of(address(config)[0], int(value))

    def _fence_of(self, thread_id: str, value: int) -> Fence:
        return Fence(run_id=thread_id, value=value)

    @staticmethod
    def _group(fence: Fence | None) -> FenceGroup:
        return None if fence is None else (fence.run_id, fence.value)

    def get_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        """Fetch a checkpoint with its pending writes (buffered ones included).

        Without a ``checkpoint_id`` in ``config``, the newest checkpoint of the namespace: one
        consistent ``Query``, two when it has stored pending writes.

        Args:
            config: ``thread_id``, optional ``checkpoint_ns`` and ``checkpoint_id``.

        Returns:
            The checkpoint tuple, or ``None`` if there is none.

        Raises:
            CheckpointPayloadMissingError: Its offloaded payload is gone from S3.
            StorageError: DynamoDB or S3 refused a read.
        """
        thread_id, ns = address(config)
        checkpoint_id = get_checkpoint_id(config)
        buffered = self.buffer.snapshot(thread_id)
        if checkpoint_id:
            self._store_held(thread_id)
            group = self.table.checkpoint_group(thread_id, ns, checkpoint_id)
        else:
            group = self._newest_group(config, thread_id, ns)
        if group is None:
            return None
        checkpoint = self._checkpoint(group[0], {}, newest=not checkpoint_id)
        return self.codec.to_tuple(*group, buffered, checkpoint)

    def _checkpoint(self, item: Item, known: dict[str, Item], *, newest: bool) -> Checkpoint:
        """The checkpoint of an item: whole, or assembled from its delta lineage.

        ``known`` holds checkpoint items already read (by id), and gets those read here: a
        listing reads a lineage once for all the checkpoints on it. A ``newest`` read is
        remembered, so the next put is diffed against it without another read.
        """
        thread: Thread = (text(item, "PK"), text(item, "ns"))
        if "dv" not in item:
            whole: Checkpoint = self.codec.payload(item)
            if newest:
                _, view = assemble([(text(item, "cid"), whole, False)], self._dumps)
                assert view is not None
                self._remember(thread, view, whole, {text(item, "cid"): text(item, "SK")})
            return whole
        checkpoint_id, base = text(item, "cid"), text(item, "base")
        with self.buffer.lock:
            cached = self._views.get(thread)
        if cached is not None and cached[0].checkpoint_id == checkpoint_id:
            return copy.deepcopy(cached[1])
        lineage = self._lineage(item, base, known)
        payloads = [(text(i, "cid"), self.codec.payload(i), "dv" in i) for i in lineage]
        checkpoint, view = assemble(payloads, self._dumps if newest else None)
        if view is not None:
            keys = {text(i, "cid"): text(i, "SK") for i in lineage}
            self._remember(thread, view, checkpoint, keys)
        return checkpoint

    def _lineage(self, item: Item, base: str, known: dict[str, Item]) -> Items:
        """The items from ``base`` to ``item`` along the parent links, oldest first."""
        thread_id, ns, checkpoint_id = text(item, "PK"), text(item, "ns"), text(item, "cid")
        chain = [item]
        fetched = False
        while text(chain[-1], "cid") != base:
            parent = chain[-1].get("par", {}).get("S")
            if parent is not None and parent not in known and not fetched:
                low = item.get("bsk", {}).get("S") or checkpoint_sk(ns, base)
                for found in self.table.checkpoint_range(thread_id, low, text(item, "SK")):
                    known.setdefault(text(found, "cid"), found)
                fetched = True
            if parent is None or parent not in known:
                raise StorageError(
                    f"checkpoint {checkpoint_id} of thread {thread_id} (namespace {ns!r}) is "
                    f"stored as changes since checkpoint {base}, but its ancestor "
                    f"{parent or '(none)'} is missing: the thread's items were deleted in part "
                    "(hint: restore the table from a backup, or fail the run)"
                )
            chain.append(known[parent])
        return chain[::-1]

    def _store_held(self, thread_id: str | None) -> None:
        """Store the input checkpoints held back for the next put (see :meth:`put`) before a
        read of the table that must see them (``None``: of every thread)."""
        with self.buffer.lock:
            for group in self.buffer.held_groups(thread_id):
                fence = None if group is None else self._fence_of(*group)
                self._write(group, fence, self.buffer.items(group), "held checkpoint")

    def _remember(
        self, thread: Thread, view: View, checkpoint: Checkpoint, keys: dict[str, str]
    ) -> None:
        """Keep the newest checkpoint of a thread (a few hundred threads at most), and the
        keys of the items its view is built on (``keys`` adds to those known)."""
        with self.buffer.lock:
            self._views[thread] = (view, checkpoint)
            self._views.move_to_end(thread)
            known = {**self._sks.get(thread, {}), **keys}
            bases = {view.checkpoint_id, *(f.base for f in view.fields.values())}
            self._sks[thread] = {cid: sk for cid, sk in known.items() if cid in bases}
            while len(self._views) > _VIEWS_KEPT:
                dropped, _ = self._views.popitem(last=False)
                self._sks.pop(dropped, None)

    def _expiring(self, checkpoint_id: str) -> bool:
        """Whether a checkpoint's item is past half its TTL: deltas are not built on it (its
        expiry would take the newer items that need it along)."""
        ttl = self.codec.ttl_seconds
        created = written_at(checkpoint_id)
        return ttl is not None and created is not None and time.time() - created > ttl / 2

    def _dumps(self, value: Any) -> bytes:
        kind, data = self.serde.dumps_typed(value)
        return kind.encode() + b"\0" + data

    def _newest_group(self, config: RunnableConfig, thread_id: str, ns: str) -> Group | None:
        """The namespace's newest checkpoint: remembered under the config's fence, else read."""
        fence = self._fence(config)
        if fence is None:
            self._store_held(thread_id)
            return self.table.latest_group(thread_id, ns)
        with self.buffer.lock:
            known = self._newest.get((thread_id, ns))
            if known is not None and fence.value - 1 <= known[0] <= fence.value:
                # Ours, or the previous fence's: no lease was taken in between, so nobody wrote
                # (but markers: the next write steps over them).
                self._newest[thread_id, ns] = (fence.value, known[1])
                self._carry_cursor(fence, ns)
                return known[1]
        self._store_held(thread_id)
        with self.buffer.lock:
            generation = self._writes_stored
        head = self.table.read_head(thread_id, ns)
        with self.buffer.lock:
            cursor = self._cursors.get((thread_id, ns))
            if generation == self._writes_stored and (cursor is None or cursor[0] != fence.value):
                self._establish(fence, ns, head)
            if generation == self._writes_stored:
                self._newest[thread_id, ns] = (fence.value, head.group)
        return head.group

    def _carry_cursor(self, fence: Fence, ns: str) -> None:
        """Under the fence after the one that wrote last, start from where that one stopped
        (after this process's own lease marker, when it wrote one)."""
        known = self._cursors.get((fence.run_id, ns))
        if known is None or known[0] not in (fence.value - 1, fence.value):
            return
        cursor = known[1]
        claimed = None if ns else self.slots.claimed(fence.run_id)
        if claimed is not None and claimed[0] == fence.value:
            cursor = max(cursor, claimed[1] + 1)
        self._cursors[fence.run_id, ns] = (fence.value, cursor)

    def list(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> Iterator[CheckpointTuple]:
        """List checkpoints, newest first.

        Args:
            config: ``thread_id``, optional ``checkpoint_ns`` (all namespaces when absent) and
                optional ``checkpoint_id`` (only that checkpoint); ``None`` lists every thread
                (a table scan: operators only).
            filter: Metadata key/value pairs that must all match.
            before: Only checkpoints older than this config's ``checkpoint_id``.
            limit: At most this many tuples.

        Yields:
            Checkpoint tuples with their pending writes.

        Raises:
            CheckpointPayloadMissingError: A listed checkpoint's payload is gone from S3.
            StorageError: DynamoDB or S3 refused a read.
        """
        before_id = get_checkpoint_id(before) if before else None
        self._store_held(None if config is None else str(config["configurable"]["thread_id"]))
        if config is None:
            groups: Iterable[Group] = self.table.scan_groups()
            buffered = self.buffer.snapshot(None)
        else:
            ns = config["configurable"].get("checkpoint_ns")
            thread_id = str(config["configurable"]["thread_id"])
            groups = self.table.query_groups(
                thread_id,
                None if ns is None else str(ns),
                before_id=before_id,
                page_limit=None if limit is None else max(16, 4 * limit),
            )
            buffered = self.buffer.snapshot(thread_id)
        if limit is not None and limit <= 0:
            return
        wanted_id = get_checkpoint_id(config) if config else None
        known: dict[str, Item] = {}  # checkpoint items read for lineages, by id
        yielded = 0
        for checkpoint_item, write_items in groups:
            checkpoint_id = text(checkpoint_item, "cid")
            if (wanted_id is not None and checkpoint_id != wanted_id) or (
                before_id is not None and checkpoint_id >= before_id
            ):
                continue
            if filter:
                metadata = self.codec.metadata(checkpoint_item)
                if any(metadata.get(key) != value for key, value in filter.items()):
                    continue
            known.setdefault(checkpoint_id, checkpoint_item)
            checkpoint = self._checkpoint(checkpoint_item, known, newest=False)
            yield self.codec.to_tuple(checkpoint_item, write_items, buffered, checkpoint)
            yielded += 1
            if limit is not None and yielded >= limit:
                return

    def delete_thread(self, thread_id: str) -> None:
        """Delete every checkpoint and write of a thread, in all namespaces, and its S3 payloads.

        Args:
            thread_id: The thread (run) to delete.

        Raises:
            StorageError: DynamoDB or S3 refused a call.
        """
        self.buffer.forget_thread(thread_id)
        with self.buffer.lock:
            for thread in [thread for thread in self._views if thread[0] == thread_id]:
                del self._views[thread]
                self._sks.pop(thread, None)
            for thread in [thread for thread in self._cursors if thread[0] == thread_id]:
                del self._cursors[thread]
        deleted = self.table.delete_thread(thread_id)
        self.codec.delete_thread(thread_id)
        logger.debug("deleted thread %s (%d items)", thread_id, deleted)

    async def asetup(self) -> None:
        """Async twin of :meth:`setup`."""
        await asyncio.to_thread(self.setup)

    async def aflush(self) -> None:
        """Async twin of :meth:`flush`."""
        await asyncio.to_thread(self.flush)


def _with_writes(
    known: dict[Thread, tuple[int, Group | None]], items: Items, fence: int
) -> dict[Thread, tuple[int, Group | None]]:
    """The remembered newest checkpoints of a thread after a fenced write of ``items`` landed:
    each with the writes stored for it added (a stored checkpoint is remembered by ``put``)."""
    kept: dict[Thread, tuple[int, Group | None]] = {}
    for thread, (_, group) in known.items():
        head_id = None if group is None else text(group[0], "cid")
        stored = [item for item in items if text(item, "ns") == thread[1]]
        if any(text(item, "k") == "c" and text(item, "cid") != head_id for item in stored):
            continue  # a newer checkpoint of the namespace: put() remembers it
        if group is None:
            kept[thread] = (fence, None)
            continue
        head, writes = group
        ours = [item for item in stored if text(item, "k") == "w" and text(item, "cid") == head_id]
        merged = {text(item, "SK"): item for item in [*writes, *ours]}
        kept[thread] = (fence, (head, list(merged.values())))
    return kept
