"""Flow control as data on a workflow (issue 31): what shapes the starts of its runs.

Every key is an expression over the run's input (``{{ customer_id }}`` or
``{{ input.customer_id }}``; empty: one key for the whole workflow), and every decision is kept
where people look: a dropped start is a run ended ``cancelled`` with the reason on its timeline.

Enforced today (``app/runs.py``'s ``launch_run``), each a resource of
:mod:`langorch.domain.resources` (conditional writes, a capped queue of one item per waiter):

- ``rate_limit: {limit, period, key}`` — at most ``limit`` starts per key in any ``period``;
  a start past it is dropped (cancelled, reason ``rate_limit``). A start takes a lease that
  lasts ``period`` and is never given back early, so the window slides.
- ``singleton: {key, mode: skip}`` — at most one run per key at once; a start while one runs
  is dropped (cancelled, reason ``singleton``). The lease is the run's until it ends. With
  ``mode: cancel_running`` the new start cancels the running run instead (its timeline says
  by which run; the new run's ``resource_acquired`` event names the one it cancelled).
- ``priority`` — among the runs queued for a ``concurrency`` key, higher starts first (FIFO
  within a priority): the waiter's stored sort key carries it
  (:func:`langorch.domain.resources.waiter_key`).
- ``debounce: {period, key}`` — a start of a key holds its run asleep for ``period`` (its
  first segment sleeps, the state machine's Wait: nothing polls); a later start within the
  period cancels the held run (reason ``debounce: ...``) and holds its own, carrying the count
  of starts so far in ``trigger.detail.debounce.count``. The last start runs, with its input.
- ``batch: {max_size, timeout, key}`` — starts of a key are collected into one run whose input
  is ``{"items": [input, ...]}``: each start takes the open batch over (cancelling the run that
  held it, reason ``batch: ...``) with the items so far plus its own, and sleeps until
  ``timeout`` after the batch's first start; the start that makes ``max_size`` runs at once
  and closes the batch.

- ``throttle: {limit, period, key}`` — past ``limit`` starts per key in any ``period``, a
  start is delayed, not dropped: it reserves the key's next free slot
  (:func:`langorch.domain.resources.reserve`, first come first served), waits ``queued`` with
  the reason and its slot (``status_reason``, ``trigger.detail.throttle``, a
  ``resource_waiting`` event) and its first segment sleeps until then (the state machine's
  Wait, as a debounced run's: no Lambda, nothing polls). A slot more than a week away is
  dropped instead (cancelled, reason ``throttle: ...``).

On a trigger (``app/runs.py``'s ``launch_run``, the trigger handlers pass it):

- ``concurrency: {limit, key}`` — like the workflow's, for the runs that trigger starts: a key
  of its own (``concurrency:<workflow>@<trigger type>:<key>``), taken before the workflow's;
  a run starts only holding both (it waits, holding its trigger's, in the workflow's queue).
  Runs started by hand take only the workflow's.

- ``catch_up: latest|all|none`` (a schedule trigger) — after downtime, the slots missed since
  the schedule's last recorded slot are started all, the most recent only, or none (the count
  recorded on one cancelled run): :func:`langorch.app.schedules.catch_up_schedules`, which
  ``langorch dev`` runs when it starts. Unset, as before: nothing is caught up.

Nothing is validated-but-not-enforced today (:data:`NOT_ENFORCED` is empty; ``workflows put``
warns for a key listed there).
"""

from __future__ import annotations

import re
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from langorch.domain.concurrency import ConcurrencySpec
from langorch.domain.errors import InputValidationError, Problem
from langorch.domain.templates import TemplateError, check, render

RATE_PREFIX = "rate:"
SINGLETON_PREFIX = "singleton:"
DEBOUNCE_PREFIX = "debounce:"
BATCH_PREFIX = "batch:"
THROTTLE_PREFIX = "throttle:"
BATCH = "batch"
"""The key of a batch run's ``trigger.detail``: ``{"until": epoch seconds, "count": n}``."""
DEBOUNCE = "debounce"
"""The key of a debounced run's ``trigger.detail``: ``{"until": epoch seconds, "count": n}``."""
THROTTLE = "throttle"
"""The key of a delayed run's ``trigger.detail``: ``{"until": epoch seconds, "key": resource,
"delay": seconds}``."""
HOLDS = (DEBOUNCE, BATCH, THROTTLE)
"""The ``trigger.detail`` keys that hold a run's first segment until their ``until``."""

MAX_PERIOD_SECONDS = 7 * 86_400
"""The longest window (a week): past it a lease would outlive what a key is worth keeping."""

PERIOD = re.compile(r"^([1-9][0-9]{0,5})(s|m|h|d)$")
_UNIT_SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86_400}
_PERIOD_HINT = "a whole number and a unit: 30s, 1m, 2h, 1d (at most 7d)"


def period_seconds(text: str) -> int:
    """``30s`` -> 30, ``1m`` -> 60, ``2h`` -> 7200, ``1d`` -> 86400.

    Raises:
        ValueError: not a period, or longer than :data:`MAX_PERIOD_SECONDS`.
    """
    match = PERIOD.match(text)
    if match is None:
        raise ValueError(f"{text!r} is not a period: use {_PERIOD_HINT}")
    seconds = int(match.group(1)) * _UNIT_SECONDS[match.group(2)]
    if seconds > MAX_PERIOD_SECONDS:
        raise ValueError(f"{text!r} is longer than 7d")
    return seconds


class _Spec(BaseModel):
    model_config = ConfigDict(extra="forbid")

    key: str = Field(default="", max_length=500)
    """A template over the run's input; empty: one key for the whole workflow."""

    @field_validator("key")
    @classmethod
    def _a_template(cls, value: str) -> str:
        problem = check(value)
        if problem:
            raise ValueError(f"the key is not a valid template ({problem})")
        return value


def _a_period(value: str) -> str:
    period_seconds(value)
    return value


class RateSpec(_Spec):
    """``throttle`` / ``rate_limit``: ``limit`` starts per ``period`` per key."""

    limit: int = Field(ge=1, le=1000)
    """At most the resource locks' ``MAX_LIMIT``: a key's item holds up to ``limit`` leases
    (it refuses a larger limit, and 10,000 run ids would not fit DynamoDB's 400 KB item)."""
    period: str
    """``30s``, ``1m``, ``2h``, ``1d``."""

    _period = field_validator("period")(_a_period)


class DebounceSpec(_Spec):
    """``debounce``: the last start of a key within ``period`` runs (with the count it replaced)."""

    period: str
    _period = field_validator("period")(_a_period)


class BatchSpec(_Spec):
    """``batch``: starts of a key collected into one run (its input the list), up to
    ``max_size`` or ``timeout`` after the first."""

    max_size: int = Field(ge=2, le=1000)
    timeout: str
    _timeout = field_validator("timeout")(_a_period)


class SingletonSpec(_Spec):
    """``singleton``: one run per key at once; another start is skipped, or cancels the
    running one (``cancel_running``)."""

    mode: Literal["skip", "cancel_running"] = "skip"


def _unset(value: object) -> bool:
    return value is None


class FlowControl(BaseModel):
    """The flow-control keys a workflow (``TaskPlan``) carries beside ``concurrency``.

    Left out of dumps while unset, so stored definitions keep their format.
    """

    throttle: RateSpec | None = Field(default=None, exclude_if=_unset)
    """Past ``limit`` per ``period``, starts are delayed to the next free slot."""
    rate_limit: RateSpec | None = Field(default=None, exclude_if=_unset)
    """Past ``limit`` per ``period``, starts are dropped with the reason recorded."""
    debounce: DebounceSpec | None = Field(default=None, exclude_if=_unset)
    batch: BatchSpec | None = Field(default=None, exclude_if=_unset)
    priority: str | None = Field(default=None, max_length=500, exclude_if=_unset)
    """A template over the input giving a number; higher starts first among queued runs."""
    singleton: SingletonSpec | None = Field(default=None, exclude_if=_unset)

    @field_validator("priority")
    @classmethod
    def _a_template(cls, value: str | None) -> str | None:
        problem = check(value) if value else None
        if problem:
            raise ValueError(f"the priority is not a valid template ({problem})")
        return value


class TriggerFlow(BaseModel):
    """Flow-control keys on one trigger."""

    concurrency: ConcurrencySpec | None = Field(default=None, exclude_if=_unset)
    """Like the workflow's, for the runs this trigger starts: a key of its own
    (``concurrency:<workflow>@<trigger type>:<key>``), held with the workflow's."""
    catch_up: Literal["latest", "all", "none"] | None = Field(default=None, exclude_if=_unset)
    """schedule: after downtime, start the latest missed slot, all of them, or none (the count
    recorded); unset: none, and nothing recorded (``langorch schedules backfill`` by hand)."""


NOT_ENFORCED: tuple[str, ...] = ()
"""Workflow keys that are validated and stored but shape no start yet (a warning on put)."""
TRIGGER_NOT_ENFORCED: tuple[str, ...] = ()
"""The same for a trigger's keys."""


def unenforced(plan: FlowControl, triggers: list[TriggerFlow]) -> list[Problem]:
    """Warnings for the flow-control keys a definition sets that are not enforced yet."""
    hint = "it is stored but does not shape starts yet (README: Triggers and flow control)"
    found = [
        Problem(name, f"{name} is not enforced yet", hint)
        for name in NOT_ENFORCED
        if getattr(plan, name) is not None
    ]
    for i, trigger in enumerate(triggers):
        for name in TRIGGER_NOT_ENFORCED:
            if getattr(trigger, name) is not None:
                found.append(Problem(f"triggers[{i}].{name}", f"{name} is not enforced yet", hint))
    return found


def priority_of(workflow_id: str, template: str | None, data: dict[str, Any]) -> int:
    """A run's ``priority`` rendered over its input: a whole number, clamped to the queue's
    range (:data:`langorch.domain.resources.MIN_PRIORITY` to ``MAX_PRIORITY``); 0 unset.

    Raises:
        InputValidationError: it does not render, or not to a whole number (at ``priority``).
    """
    from langorch.domain.resources import MAX_PRIORITY, MIN_PRIORITY

    if not template:
        return 0
    try:
        text = render(template, {**data, "input": data}, max_chars=100)
        value = int(str(text).strip())
    except (TemplateError, ValueError) as exc:
        raise InputValidationError(
            f"workflow {workflow_id}",
            [
                Problem(
                    "priority",
                    f"{template!r} does not render to a whole number over the input ({exc})",
                    "give the run the input it reads, as an integer (e.g. 0, 5, -1)",
                )
            ],
        ) from exc
    return max(MIN_PRIORITY, min(MAX_PRIORITY, value))


def key_resource(prefix: str, workflow_id: str, spec: _Spec, data: dict[str, Any], at: str) -> str:
    """The resource a key's starts share (``rate:<workflow>:<key>``).

    Raises:
        InputValidationError: the key does not render over the input (at ``<at>.key``).
    """
    from langorch.domain.concurrency import ConcurrencySpec, resource_name

    try:
        render(spec.key, {**data, "input": data}, max_chars=10_000) if spec.key else ""
    except TemplateError as exc:
        raise InputValidationError(
            f"workflow {workflow_id}",
            [
                Problem(
                    f"{at}.key",
                    f"cannot render {spec.key!r} over the input: {exc}",
                    "give the run the input the key reads",
                )
            ],
        ) from exc
    name = resource_name(workflow_id, ConcurrencySpec(limit=1, key=spec.key), data)
    return prefix + name.removeprefix("concurrency:")
