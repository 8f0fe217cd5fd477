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
  request as the next ``put()``. The checkpoint that ``put()`` stores already
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
* **Fenced writes: one conditional PutItem per superstep** (RELIABILITY.md "Runs and state":
  the history never forks). A segment puts its lease's fence in the config
  (``configurable["langorch_fence"]``, see ``engine.segments``); a saver built with
  ``runs_table`` then stores a fenced thread's items in a dense sequence of *slots* per
  namespace (``SK`` ``S#{ns}#{n:012d}``, :mod:`..checkpoint_slots`), each written by one
  ``PutItem`` conditional on the slot being free (``attribute_not_exists(SK)``): a superstep is
  one slot item, the checkpoint with the writes it carries (they are one superstep), billed
  once at its size, with no read of another item. Only a superstep that outgrows an item
  takes several slots (each checkpoint its own, then the writes: a write never lies below the
  checkpoint it belongs to), one conditional ``PutItem`` each; they are not atomic together,
  which is safe for the reason above. *Taking a lease claims the next slot*: after the run
  item's conditional ``UpdateItem`` (fence + 1, ``RunsRepository.acquire_lease``), the segment
  (``run_segment``: :meth:`DynamoCheckpointSaver.claim_lease`) puts a small lease marker (its
  fence) in the slot after the newest, stepping on if another writer just took it. The
  segment that held the lease before then finds its next slot taken by a higher fence and
  raises :class:`~langorch.domain.errors.LeaseLostError` having written nothing; a read that
  finds a higher fence on top refuses that fence's writes without a request. The new segment
  writes after its marker (this process's marker and newest slot are known without a read:
  ``SlotClaims``). Leases taken to write only the record (an operator's, a re-park's) claim no
  slot, so the functions taking them need no grant on this table. The run's first lease
  writes no marker (nobody can be stale before it); a segment that finds no marker of its own
  fence (that case, a rewind's lease, a marker lost to a crash) asks the runs store for the
  run's fence once (``fences``), and above fence 1 writes its marker itself.
  *An operator's pause claims a slot the same way* (``app.pause.pause_run`` calls
  :meth:`DynamoCheckpointSaver.claim_pause` once the request stands on the run item: a pause
  marker, no fence, so it refuses nobody): the running segment's next write finds
  it, steps over it to store its superstep (it still holds the lease), and
  :meth:`DynamoCheckpointSaver.pause_seen` says so: the segment learns of the pause from the
  write it makes anyway, never by reading at a step boundary. A marker is seen once; a pause
  whose marker was never written (its process died) is still honoured at the next segment's
  start and at its next park, which read the run record; asking again writes another. A slot
  holding exactly the item sent is a retried request that had landed. Fenced buffered writes
  are kept per ``(thread, fence)``, so a saver shared by segments never mixes a stale
  segment's writes into a newer one's request; a refused group is dropped.

  Why not a transaction with a ``ConditionCheck`` of the run's fence (the design before):
  DynamoDB bills a transaction's writes twice and its check at the size of the checked item,
  so every superstep cost twice its bytes plus 2 units; moto also copies whole tables per
  transaction item. Why not a conditional put on the checkpoint item itself (``fence``
  compared in place): the new item has no fence to compare against; only a shared key both
  segments race for can refuse the stale one, and the next slot is that key.
  Limits: a thread written under fences must keep writing under fences (an unfenced write
  goes to the layout below, which a read of a thread with slots does not consult for its
  newest checkpoint; only forks copy unfenced, into a new thread). Lookups by checkpoint id
  (``get_tuple`` with ``checkpoint_id``, ``list(before=...)``, rewinds and forks in
  ``engine.rewind``) are rare and read the namespace's slots newest-first up to the id (a slot
  key says nothing of the id it holds): one paged ``Query``. The hot path (the newest
  checkpoint, a resume) stays one consistent ``Query`` of the top few slots.
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
  are one slot item (the input checkpoint in its ``pc``). The newest checkpoint of a thread,
  with its stored writes, is remembered under the fence it was read or written under and
  trusted under the next one too (no lease was taken in between, so nobody wrote but markers,
  which the next write steps over: our own resume after an interrupt in this process reads
  nothing); ``starts_empty`` tells a run's first segment that its thread is empty (its first
  lease, not a fork), so it reads nothing at all and writes slot 1.
* **Consistent reads** everywhere. The latest checkpoint costs one ``Query`` of the top few
  slots, writes stored after it included (in the keyed layout, two when it has pending
  writes), thanks to the item layout below.
* **S3 offload**: a payload of ``offload_threshold_bytes`` or more (after optional zlib
  compression) goes to S3 first, then the item that references it. A referenced payload that
  is gone raises :class:`~langorch.domain.errors.CheckpointPayloadMissingError`; there is no
  fallback to an older checkpoint.
* No per-write INFO logging; DEBUG lines carry ids and counts, never payloads.

Item layout (one table, string ``PK``/``SK``, on-demand)
--------------------------------------------------------
Fenced writes (a segment's) take slots; unfenced ones (tests, the conformance suite, a fork's
copy into a new thread, runs stored before slots) use the keyed layout. One reader reads both:
a namespace's slots first (they are newer), then, when they hold no checkpoint, the keyed
layout, with the writes in slots aimed at its checkpoint (a run parked before slots resumes).

================  ===============================================  =====================
item              SK                                               attributes
================  ===============================================  =====================
checkpoint slot   ``S#{ns}#{n:012d}``                              k="c", f, ns, cid, par?,
                                                                   t, p|ref, enc?, mt, m,
                                                                   dv?, base?, bsk?, ttl?,
                                                                   ws? (L of writes),
                                                                   pc? (L of checkpoints)
writes slot       ``S#{ns}#{n:012d}``                              k="w", f, ns, ws
lease marker      ``S#{ns}#{n:012d}``                              k="l", f, ns
pause marker      ``S#{ns}#{n:012d}``                              k="p", ns
checkpoint        ``C#{ns}#{checkpoint_id}``                       k="c", ns, cid, par?,
                                                                   t, p|ref, enc?, mt, m,
                                                                   dv?, base?, ttl?
task writes       ``C#{ns}#{checkpoint_id}#W#{task_id}#{slot}``    k="w", ns, cid, tid,
                                                                   tp, t, p|ref, enc?, ttl?
================  ===============================================  =====================

In a slot, ``f`` is the fence it was written under; ``ws`` holds write items (each without
``PK``, keyed by its ``SK`` of the keyed layout, which identifies it) and ``pc`` checkpoints of
the same request stored before the slot's own (a held input checkpoint); ``bsk`` is the key of
the item holding ``base``, so a delta's lineage is one ``Query`` over a key range (keyed items
sort before slots, so a range may start in the keyed layout and end in slots). A slot of writes
expires with them (``ttl``); markers carry none (a few dozen bytes per lease or pause, removed
with the thread by ``delete_thread``).

``PK`` is the thread id (so ``delete_thread`` is one paged ``Query``); ``{ns}`` is the checkpoint
namespace with ``%`` and ``#`` percent-escaped, so a namespace is always exactly the prefix
``C#{ns}#`` (``S#{ns}#``). A descending ``Query`` over a namespace's slots meets the writes
stored after a checkpoint, then the checkpoint (usually under a lease marker). In the keyed
layout checkpoint ids are time-ordered (uuid6), so a descending ``Query`` over the prefix
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
``_buffer`` (the write buffer and when it must flush), ``_fence`` (the lease's fence),
``_slotting`` (a superstep's items as slot items, and back), ``_table`` (the table's requests)
and ``_threaded`` (the async API). Slot keys and the markers a lease and a pause write live in
``..checkpoint_slots``, outside this package and free of LangGraph (the container shares one
``SlotClaims`` between savers).
"""

from langorch.adapters.dynamodb.checkpointer.saver import DynamoCheckpointSaver

__all__ = ["DynamoCheckpointSaver"]
