"""Durable LangGraph checkpointer on DynamoDB, with S3 offload for payloads too big for an item.

Why our own saver and not ``langgraph_checkpoint_aws.DynamoDBSaver``
-------------------------------------------------------------------
Measured on langgraph 1.2 / langgraph-checkpoint-aws 1.2 (PERFORMANCE.md baselines):

* it makes ~6 DynamoDB calls per superstep: two PutItems per checkpoint and two per write,
  never batched, so ``durability="sync"`` costs ~37 ms and ~5.5 write units per step;
* it reads with eventual consistency, so a segment that starts right after the previous one
  can resume from a stale checkpoint;
* when an offloaded payload is missing it silently moves on to an older checkpoint, which
  replays finished steps (RELIABILITY.md: a missing payload must be a loud error);
* it logs an INFO line per write, which floods CloudWatch and costs money.

What this saver does instead
----------------------------
* **One request per superstep.** ``put_writes`` is buffered in memory and persisted in the same
  ``BatchWriteItem`` as the next ``put()``. The checkpoint that ``put()`` stores already
  contains the effect of those writes, so nothing a completed superstep produced can be lost:
  a crash mid-superstep loses the writes of that superstep's finished tasks, and those tasks
  run again on resume (external effects carry idempotency keys, RELIABILITY.md).
  Writes after which no ``put()`` follows (``__interrupt__``, ``__error__``, and the writes of
  sibling tasks finishing after those), plus ``__resume__`` (a human decision must survive a
  crash) and a few LangGraph internals, are flushed at once with everything buffered. So are
  writes aimed at an older checkpoint. ``get_tuple``/``list`` merge the buffer
  (read-your-writes). A caller that stops a run some other way (a time budget, an exception
  outside any node) calls :meth:`DynamoCheckpointSaver.flush`.
* **BatchWriteItem, unless fenced.** Unfenced writes (tests, the conformance suite, a local
  run without a lease) are ``BatchWriteItem``: a transaction costs two write units per KB
  instead of one, caps a request at 4 MB instead of 16 MB, and the atomicity is not needed:
  every item is valid on its own. If only the checkpoint lands, it already holds the writes'
  effect; if only the writes land, resuming from the previous checkpoint applies them and
  skips their tasks. ``UnprocessedItems`` are retried with backoff; if the buffer needs more
  than one request (over 25 items), the checkpoint goes in the last one, so it never becomes
  visible before the writes that produced it. (If a graph ever uses LangGraph's beta
  ``DeltaChannel``, whose value is rebuilt from writes, switch ``CheckpointTable.write_items`` to a
  transaction; langorch's state uses plain reducers.)
* **Fenced writes** (RELIABILITY.md "Runs and state": the history never forks). A segment puts
  its lease's fence in the config (``configurable["langorch_fence"]``, see
  ``engine.segments``); a saver built with ``runs_table`` then writes each superstep as one
  ``TransactWriteItems``: a ``ConditionCheck`` that the ``fence`` of the run's small fence item
  (``RunsRepository`` copies it there with the lease) still equals it, plus the puts. A
  segment whose lease was taken over gets
  :class:`~langorch.domain.errors.LeaseLostError` and writes nothing, so it cannot add a
  checkpoint beside the newer segment's, and never reaches the next step. A checkpoint's check
  also asks that no operator's pause is flagged on that item: when one is, the superstep is
  stored under the fence alone (a second transaction) and
  :meth:`DynamoCheckpointSaver.pause_seen` says so, which is how a segment learns of a pause at
  its step boundary without reading the run item there. Still one request per superstep;
  the price is the transaction's double write units and the check's two (the check bills the
  size of the item it reads: the run item, with the run's input and outputs, billed two per
  KB on every superstep). A
  superstep over 99 items or ~3.5 MB is cut into several transactions, the checkpoint in the
  last, each carrying the check: they are not atomic together, which is safe for the reason
  above (a chunk that lands was written while the lease was held, like the writes of a
  segment that crashed there; a refused one writes nothing). Fenced buffered writes are kept
  per ``(thread, fence)``, so a saver shared by segments never mixes a stale segment's writes
  into a newer one's request; a refused group is dropped.
* **Deltas** (``_deltas``). A checkpoint item holds only what changed since its parent: the
  keys of a dict channel that changed, the elements a list channel gained, whole values
  otherwise (and again whenever a field's patches outgrow it 4 times, so reads stay bounded);
  ``channel_versions`` and ``versions_seen`` are diffed the same way. At 1 KB of new state per
  step a superstep writes about the same bytes at step 400 as at step 10, and a 400-step run
  needs no offload. The saver diffs against the newest checkpoint it stored or read (kept in
  memory per thread; a checkpoint never changes once stored, so this needs no fence), and
  stores a put whose parent it does not know whole. A read gathers the items from the oldest
  one still needed (``base``) to the checkpoint along the parent links (one ``Query``), and
  replays them; the newest checkpoint of a thread it wrote is served from memory. Items
  without ``dv`` are whole checkpoints (the format before deltas): read as before, and the base
  of the deltas written after them, so runs started before deltas resume. With a TTL, a field
  whose whole value lies in an item past half its TTL is stored whole again: the items a
  checkpoint needs are at most half a TTL older than it, so they outlive its write by at least
  half the TTL (before deltas, every item stood alone).
* **Fewer requests per segment** (issue 33). Under a fence, a run's input checkpoint is held
  for the next put (only LangGraph's ``__start__`` task runs in between, with no effect outside
  the graph; a flush or a read by id stores it first), so a new run's first two checkpoints
  are one transaction. The newest checkpoint of a thread, with its stored writes, is
  remembered under the fence it was read or written under and trusted under the next one too
  (no lease was taken in between, so nobody wrote: our own resume after an interrupt in this
  process reads nothing); ``starts_empty`` tells a run's first segment that its thread is
  empty (its first lease, not a fork), so it reads nothing at all.
* **Consistent reads** everywhere. The latest checkpoint costs one ``Query`` (two when it has
  pending writes, e.g. a parked interrupt), thanks to the item layout below.
* **S3 offload**: a payload of ``offload_threshold_bytes`` or more (after optional zlib
  compression) goes to S3 first, then the item that references it. A referenced payload that
  is gone raises :class:`~langorch.domain.errors.CheckpointPayloadMissingError`; there is no
  fallback to an older checkpoint.
* No per-write INFO logging; DEBUG lines carry ids and counts, never payloads.

Item layout (one table, string ``PK``/``SK``, on-demand)
--------------------------------------------------------
================  ===============================================  =====================
item              SK                                               attributes
================  ===============================================  =====================
checkpoint        ``C#{ns}#{checkpoint_id}``                       k="c", ns, cid, par?,
                                                                   t, p|ref, enc?, mt, m,
                                                                   dv?, base?, ttl?
task writes       ``C#{ns}#{checkpoint_id}#W#{task_id}#{slot}``    k="w", ns, cid, tid,
                                                                   tp, t, p|ref, enc?, ttl?
================  ===============================================  =====================

``PK`` is the thread id (so ``delete_thread`` is one paged ``Query``); ``{ns}`` is the checkpoint
namespace with ``%`` and ``#`` percent-escaped, so a namespace is always exactly the prefix
``C#{ns}#``. Checkpoint ids are time-ordered (uuid6), so a descending ``Query`` over the prefix
starts at the newest checkpoint's writes, then the newest checkpoint, then older ones: the
writes of a checkpoint sort right after it. ``slot`` is ``r`` for a task's regular writes
(stored together, one item per task) or the negative index LangGraph gives a special channel
(``-1`` error, ``-3`` interrupt, ...), which keeps specials from overwriting regular writes.
``p`` is the serialized payload (``t`` its serde type, ``enc="zlib"`` when compressed), or ``ref``
its S3 key (``sz`` its stored size); ``m``/``mt`` the serialized metadata; ``par`` the parent id.
A checkpoint's payload is the delta of :mod:`._deltas` when ``dv`` is set (``base``: the oldest
checkpoint a read needs), else the whole checkpoint.

Modules
-------
``saver`` holds :class:`DynamoCheckpointSaver`, which only sequences the helpers: ``_keys`` (item
and object keys), ``_deltas`` (a checkpoint as changes since its parent, and back),
``_payload`` (items in and out: serialization, compression, S3 offload),
``_buffer`` (the write buffer and when it must flush), ``_fence`` (the lease check),
``_table`` (the table's requests) and
``_threaded`` (the async API).
"""

from langorch.adapters.dynamodb.checkpointer.saver import DynamoCheckpointSaver

__all__ = ["DynamoCheckpointSaver"]
