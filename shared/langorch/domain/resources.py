"""Resource locks (seed 001 §7b): a step that names a ``resource`` runs only while it holds one
of the resource's ``concurrency_limit`` leases.

The rules here are pure: a resource's state (its leases and its queue of waiters) goes in, the
new state and the answer come out. The stores (``tests/fakes/resources.py``,
``adapters/dynamodb/resources.py``) only read the state, apply a rule and write it back with a
conditional write, so the rules are the same everywhere and are tested without AWS.

- A lease is held by a *holder*, ``<run_id>/<step_id>``, and expires ``lease_seconds`` after it
  was taken or refreshed: the holder of a lease that outlived its segment (a crashed Lambda)
  has died, and the next acquirer reclaims the slot.
- Waiters queue by priority (a workflow's ``priority``; 0 by default), then in arrival order
  (FIFO). A free slot goes to the first waiters in the queue; a newcomer never overtakes a
  waiter of its priority or higher. A waiter that stops asking (its run ended without saying
  so) drops out after ``wait_seconds``.
- An undeclared resource has :data:`DEFAULT_LIMIT` (1): a resource is single-capacity until an
  operator says otherwise (``langorch resources set NAME --limit N``).
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field, replace

from langorch.domain.errors import LangorchError, Problem

DEFAULT_LIMIT = 1
"""Leases of a resource nobody declared: one at a time, the safe default for a desktop session."""

MAX_LIMIT = 1000
"""The largest ``concurrency_limit`` (a bound on the lease map one item carries)."""

MIN_PRIORITY, MAX_PRIORITY = -9999, 9999
"""A waiter's priority range (a workflow's rendered ``priority`` is clamped to it)."""

ARRIVALS = 10**12
"""Arrival numbers per priority band in a stored waiter's sort key (:func:`waiter_key`)."""

MAX_WAITERS = 1000
"""The default cap on a resource's queue (``LANGORCH_RESOURCE_QUEUE_CAP`` sets it per deployment).

Each waiter is its own stored item (DynamoDB's ``adapters.dynamodb.resources``), so the cap is
not an item-size limit but a bound on what one resource may hold back: past it an acquire is
refused (:class:`QueueFullError`) rather than queued behind thousands of others."""

POLL_SECONDS = 10
"""The longest a run that found its resource full stays parked (a task token, no Lambda)
before it asks again, when no release woke it first (its holder died); its place in the queue
is kept meanwhile."""

WAITER_SECONDS = 6 * POLL_SECONDS
"""A waiter that has not asked again within this long has gone (its run ended): it leaves the
queue so it cannot block the runs behind it."""

RESOURCE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:/@-]{0,127}$")
"""``browser:session-1``, ``desktop:vm-01:session-1``, ``web:pool-a``."""

_NAME_HINT = (
    "use letters, digits and _ . : / @ - (up to 128 characters), e.g. browser:session-1; "
    "templates are not supported: one literal name per step"
)


class QueueFullError(LangorchError):
    """A resource's queue holds its cap of waiters: the acquire is refused, not queued."""

    def __init__(self, name: str, cap: int) -> None:
        super().__init__(
            f"resource {name}: {cap} runs or steps already wait for it (the queue's cap); "
            "this one was refused, not queued. Try again once the queue drains, raise the cap "
            "(LANGORCH_RESOURCE_QUEUE_CAP) or the resource's limit (langorch resources set)"
        )
        self.name = name
        self.cap = cap


def holder_of(run_id: str, step_id: str) -> str:
    """Who holds a lease: one step of one run (parallel branches of a run queue like runs)."""
    return f"{run_id}/{step_id}"


def check_name(name: str, path: str) -> Iterator[Problem]:
    """Problems with a resource name, at ``path``."""
    if not RESOURCE_NAME.match(name):
        yield Problem(path, f"{name!r} is not a resource name", _NAME_HINT)


RESERVED_PREFIXES = ("model:", "model-rate:")
"""Resources langorch names itself: models' slots and rates (``model_limits``)."""


def check_not_reserved(name: str, path: str) -> list[Problem]:
    """A problem when ``name`` is one langorch keeps for itself (:data:`RESERVED_PREFIXES`)."""
    if not name.startswith(RESERVED_PREFIXES):
        return []
    return [
        Problem(
            path,
            f"{name!r} is a model's resource, which langorch keeps for itself",
            "a model's concurrency and rate are set per deployment in model_limits "
            '(LANGORCH_MODEL_LIMITS; README, "Model limits"), and every LLM step holds its '
            "model's slot by itself; name another resource",
        )
    ]


def check_limit(limit: int, path: str = "limit") -> Iterator[Problem]:
    """Problems with a ``concurrency_limit``."""
    if not 1 <= limit <= MAX_LIMIT:
        yield Problem(path, f"the limit must be 1 to {MAX_LIMIT}, not {limit}", "e.g. --limit 2")


def check_step_resource(resource: str | None, kind: str, parks: bool, path: str) -> list[Problem]:
    """A step's ``resource`` field: a literal name, on a step that does its work in a segment.

    Args:
        resource: the step's ``resource`` (``None``: nothing to check).
        kind: the step's kind name (for the message).
        parks: the kind parks or delegates (approval, wait, loop, subflow): it would hold a
            lease while nothing runs, and past the lease's expiry.
        path: the step's path (``steps[2]``).
    """
    if resource is None:
        return []
    problems = list(check_name(resource, f"{path}.resource"))
    problems += check_not_reserved(resource, f"{path}.resource")
    if parks:
        problems.append(
            Problem(
                f"{path}.resource",
                f"a {kind} step cannot hold a resource: it parks, and a lease must not outlive "
                "the segment that took it",
                "put the resource on the step that does the work",
            )
        )
    return problems


@dataclass(frozen=True)
class Waiter:
    """A holder in the queue, and until when it counts as still waiting."""

    holder: str
    expires_at: float
    token: str | None = None
    """The Step Functions task token the parked run waits on (``None`` until it parked):
    whoever frees a slot wakes the run with it. Never logged."""
    priority: int = 0
    """Higher waits ahead of lower (a workflow's ``priority``); FIFO within a priority."""


@dataclass(frozen=True)
class ResourceState:
    """One resource as stored: its limit, its leases and its queue."""

    name: str
    limit: int = DEFAULT_LIMIT
    declared: bool = False
    """The limit was set by an operator (else :data:`DEFAULT_LIMIT`)."""
    leases: dict[str, float] = field(default_factory=dict)
    """holder -> when the lease expires (epoch seconds)."""
    queue: tuple[Waiter, ...] = ()
    grants: int = 0
    """Leases granted so far: each grant is numbered, so the order runs got in is recorded."""

    def live(self, now: float) -> ResourceState:
        """Without the expired leases (dead holders) and the waiters that stopped asking."""
        return replace(
            self,
            leases={h: t for h, t in self.leases.items() if t > now},
            queue=tuple(w for w in self.queue if w.expires_at > now),
        )


@dataclass(frozen=True)
class Grant:
    """The answer to an acquire."""

    acquired: bool
    position: int = 0
    """In the queue, 1 first (0 when acquired)."""
    number: int = 0
    """The grant's number (:attr:`ResourceState.grants` when this lease was granted)."""
    reclaimed: tuple[str, ...] = ()
    """Holders whose expired leases this acquire found and dropped."""


def acquire(
    state: ResourceState,
    holder: str,
    *,
    now: float,
    lease_seconds: float,
    wait_seconds: float,
    max_waiters: int = MAX_WAITERS,
    priority: int = 0,
) -> tuple[ResourceState, Grant]:
    """Take a lease for ``holder``, or queue it: behind every waiter of its ``priority`` or
    higher, ahead of the lower ones (FIFO within a priority).

    A holder that already holds a lease keeps it, refreshed (a retried or resumed step). A free
    slot goes to the first waiters: ``holder`` gets one only if fewer waiters are ahead of it
    than there are free slots.

    Returns:
        The new state (to store) and the grant.

    Raises:
        QueueFullError: ``holder`` would join a queue that already holds ``max_waiters``.
    """
    live = state.live(now)
    reclaimed = tuple(sorted(set(state.leases) - set(live.leases)))
    leases = dict(live.leases)
    if holder in leases:
        leases[holder] = now + lease_seconds
        return replace(live, leases=leases), Grant(True, number=live.grants, reclaimed=reclaimed)
    holders = [w.holder for w in live.queue]
    ahead = holders.index(holder) if holder in holders else len(holders)
    if ahead < live.limit - len(leases):
        leases[holder] = now + lease_seconds
        queue = tuple(w for w in live.queue if w.holder != holder)
        granted = replace(live, leases=leases, queue=queue, grants=live.grants + 1)
        return granted, Grant(True, number=granted.grants, reclaimed=reclaimed)
    waiter = Waiter(holder, now + wait_seconds, priority=priority)
    if holder in holders:
        queue = tuple(
            replace(w, expires_at=waiter.expires_at) if w.holder == holder else w
            for w in live.queue
        )
    else:
        _check_room(live, max_waiters)
        queue = _enqueue(live.queue, waiter)
        ahead = queue.index(waiter)
    return replace(live, queue=queue), Grant(False, position=ahead + 1, reclaimed=reclaimed)


def reserve(
    state: ResourceState, holder: str, *, now: float, limit: int, period: float
) -> tuple[ResourceState, float]:
    """Reserve ``holder``'s start under ``limit`` starts per ``period`` (``throttle``): the
    earliest moment at or after ``now``, and after every start already reserved (first come,
    first served), such that no window of ``period`` seconds holds more than ``limit`` starts.

    A reservation is a lease that expires one ``period`` after its start (then it bounds no
    later start). Only the newest ``limit`` are kept: an older one cannot bound a start after
    them, so the item holds at most ``limit`` leases however long the backlog is. ``holder``
    already reserved gets its slot again (a retried start).

    Returns:
        The new state (to store) and the start's slot (epoch seconds; ``now`` when it may start
        at once).
    """
    live = state.live(now)
    if holder in live.leases:
        return live, live.leases[holder] - period
    starts = sorted(expiry - period for expiry in live.leases.values())
    due = max([now, *starts[-1:]])
    if len(starts) >= limit:
        due = max(due, starts[-limit] + period)  # the limit-th newest start leaves the window
    leases = {**live.leases, holder: due + period}
    newest = sorted(leases.items(), key=lambda lease: (lease[1], lease[0]))[-limit:]
    return replace(live, leases=dict(newest), grants=live.grants + 1), due


def _enqueue(queue: tuple[Waiter, ...], waiter: Waiter) -> tuple[Waiter, ...]:
    """``queue`` with ``waiter`` behind every waiter of its priority or higher."""
    at = len(queue)
    while at > 0 and queue[at - 1].priority < waiter.priority:
        at -= 1
    return (*queue[:at], waiter, *queue[at:])


def park(
    state: ResourceState,
    holder: str,
    token: str,
    *,
    now: float,
    wait_seconds: float,
    max_waiters: int = MAX_WAITERS,
) -> tuple[ResourceState, bool]:
    """Keep the task token ``holder``'s parked run waits on, beside its place in the queue.

    Returns:
        The new state, and whether it is already ``holder``'s turn (a slot freed between the
        segment that queued it and this park, so nobody will wake it: it wakes itself). A
        holder no longer queued (its place expired) is queued again at the back.

    Raises:
        QueueFullError: ``holder`` must queue again and the queue holds ``max_waiters``.
    """
    live = state.live(now)
    holders = [w.holder for w in live.queue]
    if holder in holders:
        queue = tuple(
            replace(w, token=token, expires_at=now + wait_seconds) if w.holder == holder else w
            for w in live.queue
        )
    else:
        _check_room(live, max_waiters)
        queue = _enqueue(live.queue, Waiter(holder, now + wait_seconds, token))
    parked = replace(live, queue=queue)
    return parked, holder in next_up(parked)


def _check_room(live: ResourceState, max_waiters: int) -> None:
    if len(live.queue) >= max_waiters:
        raise QueueFullError(live.name, max_waiters)


def next_up(state: ResourceState) -> list[str]:
    """The waiters whose turn it is: the first as many as there are free slots."""
    free = max(0, state.limit - len(state.leases))
    return [w.holder for w in state.queue[:free]]


def tokens_to_wake(state: ResourceState, now: float) -> list[str]:
    """The task tokens of the parked runs whose turn it is (to wake after a release)."""
    live = state.live(now)
    turn = set(next_up(live))
    return [w.token for w in live.queue if w.holder in turn and w.token]


def release(state: ResourceState, holder: str) -> tuple[ResourceState, bool]:
    """Give back ``holder``'s lease and leave the queue; returns whether it held or waited."""
    leases = {h: t for h, t in state.leases.items() if h != holder}
    queue = tuple(w for w in state.queue if w.holder != holder)
    changed = len(leases) != len(state.leases) or len(queue) != len(state.queue)
    return replace(state, leases=leases, queue=queue), changed


def holders_of_run(state: ResourceState, run_id: str) -> list[str]:
    """Every holder of ``run_id`` holding or waiting for the resource."""
    prefix = f"{run_id}/"
    found = [h for h in state.leases if h.startswith(prefix)]
    found += [w.holder for w in state.queue if w.holder.startswith(prefix)]
    return sorted(set(found))


def waiter_key(priority: int, arrival: int) -> int:
    """A stored waiter's sort key: its priority band (higher first), then its arrival."""
    return (MAX_PRIORITY + 1 - priority) * ARRIVALS + arrival


def priority_of(key: int) -> int:
    """The priority a stored waiter's key carries (0 for a key from before priorities)."""
    return 0 if key < ARRIVALS else MAX_PRIORITY + 1 - key // ARRIVALS


@dataclass(frozen=True)
class QueueChanges:
    """What a store writes to turn its stored queue into a rule's new queue, one item per
    waiter (``adapters/*/resources.py``): constant work per acquire or release, not the whole
    queue rewritten."""

    delete: tuple[int, ...] = ()
    """Keys of stored waiters that left the queue (or move)."""
    put: tuple[tuple[int, Waiter], ...] = ()
    """Waiters to write under their key: changed ones in place (a refreshed expiry, a parked
    token), new or moved ones under a new :func:`waiter_key`."""
    arrivals: int = 0
    """The last arrival number given (the store keeps it for the next change)."""


def queue_changes(
    stored: Sequence[tuple[int | None, Waiter]], new: Sequence[Waiter], arrivals: int
) -> QueueChanges:
    """The item writes from ``stored`` (key, waiter; in key order) to ``new``.

    Keys sort as the queue does (:func:`waiter_key`), so a waiter queued ahead of lower
    priorities is one write. A waiter keeps its key while the order allows; one that must now
    stand behind a waiter with a later key (queued again after its place expired) is deleted
    and written under a new key. A stored waiter without a key (a queue written by an older
    langorch as one item) gets one, which moves it into an item of its own.

    Args:
        stored: the queue as stored.
        new: the rule's new queue (sorted by priority, highest first).
        arrivals: the last arrival number given.
    """
    keys = {w.holder: (key, w) for key, w in stored if key is not None}
    staying = {w.holder for w in new}
    delete = [key for key, w in stored if key is not None and w.holder not in staying]
    put: list[tuple[int, Waiter]] = []
    last = -1
    for waiter in new:
        key, old = keys.get(waiter.holder, (None, None))
        if key is not None and key > last:
            last = key
            if waiter != old:
                put.append((key, waiter))
            continue
        if key is not None:
            delete.append(key)
        arrivals += 1
        last = waiter_key(waiter.priority, arrivals)
        put.append((last, waiter))
    return QueueChanges(tuple(sorted(delete)), tuple(put), arrivals)
