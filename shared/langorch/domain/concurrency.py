"""A workflow's ``concurrency: {limit: N, key: "{{ customer_id }}"}``: at most N runs per key.

A run of a workflow with ``concurrency`` holds one lease on the resource
``concurrency:<workflow_id>:<rendered key>`` (the resource locks of
:mod:`langorch.domain.resources`, limit N) from its start to its end. A run that finds the
key's N leases held is stored ``queued`` with no execution started (no Lambda waits) and takes
its place in the resource's FIFO queue; when a run of the key ends, the next queued runs are
granted the lease and started. A key that reads a name the input lacks renders empty: those
runs share one key.
"""

from __future__ import annotations

import hashlib
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

from langorch.domain.errors import InputValidationError, Problem
from langorch.domain.resources import MAX_LIMIT, RESOURCE_NAME
from langorch.domain.templates import TemplateError, check, render

PREFIX = "concurrency:"
"""Resources whose queues hold runs not yet started (not steps parked on a token)."""

RUN_HOLDER = "run"
"""The step part of a run's holder (``<run_id>/run``): the whole run holds the lease."""

LEASE_SECONDS = 7 * 86_400.0
"""How long a run's lease lasts when its end is never recorded (its release is on every end:
succeeded, failed, cancelled): a week, longer than a run is expected to take. Past it the
lease counts as dead and the next run of the key may start."""

WAIT_SECONDS = 30 * 86_400.0
"""How long a queued run keeps its place without being started: nothing asks again for a queued
run (no Lambda waits), so its place must outlast any realistic queue."""

MAX_KEY_CHARS = 200
"""The longest rendered key kept as text; a longer one (or one with other characters than a
resource name takes) is replaced by its hash, so equal keys still share one resource."""


class ConcurrencySpec(BaseModel):
    """A workflow's ``concurrency``."""

    model_config = ConfigDict(extra="forbid")

    limit: int = Field(ge=1, le=MAX_LIMIT)
    """Runs of one key that may run at once."""
    key: str = Field(default="", max_length=500)
    """A template over the run's input (``{{ customer_id }}`` or ``{{ input.customer_id }}``);
    empty: one key for the whole workflow."""

    @field_validator("key")
    @classmethod
    def _a_template(cls, value: str) -> str:
        problem = check(value)
        if problem:
            raise ValueError(f"the key is not a valid template ({problem})")
        return value


def resource_name(workflow_id: str, spec: ConcurrencySpec, data: dict[str, Any]) -> str:
    """The resource whose leases the workflow's runs of this input's key share.

    Raises:
        InputValidationError: the key does not render over the input (at ``concurrency.key``).
    """
    try:
        key = render(spec.key, {**data, "input": data}, max_chars=10_000) if spec.key else ""
    except TemplateError as exc:
        raise InputValidationError(
            f"workflow {workflow_id}",
            [
                Problem(
                    "concurrency.key",
                    f"cannot render {spec.key!r} over the input: {exc}",
                    "give the run the input the key reads",
                )
            ],
        ) from exc
    name = f"{PREFIX}{workflow_id}:{key}"
    if len(key) <= MAX_KEY_CHARS and RESOURCE_NAME.match(name):
        return name
    digest = hashlib.sha256(key.encode("utf-8")).hexdigest()[:24]
    return f"{PREFIX}{workflow_id}:@{digest}"


TRIGGER_DETAIL = "concurrency"
"""The ``trigger.detail`` key naming the resource of the ``concurrency`` of the trigger that
started the run (the key it holds or waits for, given back when it ends)."""

THEN = "then="
"""The step part of a run's holder on its trigger's key when it must take its workflow's key
next: ``<run_id>/then=<the workflow's resource>``."""


def trigger_resource(
    workflow_id: str, trigger_type: str, spec: ConcurrencySpec, data: dict[str, Any]
) -> str:
    """``concurrency:<workflow>@<trigger type>:<key>``: a trigger's own key, apart from the
    workflow's (a workflow id has no ``@``), shared by the runs that trigger type starts.

    Raises:
        InputValidationError: the key does not render over the input.
    """
    return resource_name(f"{workflow_id}@{trigger_type}", spec, data)


def run_holder(run_id: str, then: str | None = None) -> str:
    """A run's holder on a ``concurrency`` key: ``<run_id>/run``, or on its trigger's key
    ``<run_id>/then=<resource>`` when it must hold the workflow's ``resource`` too (it takes
    the trigger's key first, then the workflow's: both limits hold, and every run takes them in
    that order, so none waits on another holding what it needs)."""
    return f"{run_id}/{RUN_HOLDER if then is None else THEN + then}"


def run_of(holder: str) -> str:
    """The run a ``concurrency`` holder stands for (a run id has no ``/``)."""
    return holder.split("/", 1)[0]


def then_of(holder: str) -> str | None:
    """The resource a holder must take next (:func:`run_holder`), or ``None``."""
    part = holder.split("/", 1)[1] if "/" in holder else ""
    return part.removeprefix(THEN) if part.startswith(THEN) else None
