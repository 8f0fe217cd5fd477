"""Read models of the runs list and the workflow pages.

The runs list pages through the runs table's indexes with a cursor (``before``: the last run
of the page shown), so page N costs one indexed query whatever N is. Workflow and status
filters are index queries; trigger and time filters are applied to the pages read, reading on
(a bounded number of pages) until a page is full. A search (``q``) finds a run by its whole id
(one read, whatever its age) or by the start of its id among the newest runs the filters read
(:data:`MAX_READS` pages). The first page polls :func:`newer_runs` for runs started since it
was shown.
"""

from __future__ import annotations

import difflib
import json
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import yaml
from markupsafe import Markup

from langorch.console.drawing import graph_svg
from langorch.console.http import Request
from langorch.console.redact import shown
from langorch.domain.definitions import TaskPlan
from langorch.domain.errors import LangorchError, NotFoundError
from langorch.domain.plan.graph import StepGraph
from langorch.domain.prices import format_usd
from langorch.domain.runs import RunRecord, RunStatus, TimelineEvent, TimelineEventType

PAGE_SIZE = 50
MAX_READS = 20
"""Index pages read at most for one page of a filtered listing (or a search by prefix)."""
MAX_QUERY = 100
SNIPPET_CHARS = 140
"""How much of a failed run's error the list shows."""
STATUSES = [s.value for s in RunStatus]
TRIGGERS = ["manual", "webhook", "schedule", "s3", "event", "subflow"]
SINCE = {
    "1h": timedelta(hours=1),
    "24h": timedelta(days=1),
    "7d": timedelta(days=7),
    "30d": timedelta(days=30),
}


class FilterError(LangorchError):
    """A runs filter the console does not know (e.g. ``?status=bogus``)."""


@dataclass(frozen=True)
class RunsPage:
    """One page of the runs list and how to get the next one."""

    runs: list[RunRecord]
    filters: dict[str, str]
    next_cursor: str | None
    first: bool
    waiting: dict[str, str] = field(default_factory=dict)
    """Why each queued run on the page waits (run id -> a sentence)."""


def runs_page(container: Any, request: Request, *, size: int = PAGE_SIZE) -> RunsPage:
    """The runs page the request asks for (filters ``workflow``, ``status``, ``trigger``,
    ``since``, the search ``q``; cursor ``before``).

    Raises:
        FilterError: a filter value the console does not know.
    """
    filters = {k: request.arg(k) for k in ("workflow", "status", "trigger", "since", "q")}
    query = _query(filters["q"])
    status = _status(filters["status"])
    if filters["trigger"] and filters["trigger"] not in TRIGGERS:
        raise FilterError(
            f"trigger {filters['trigger']!r:.40}: choose one of {', '.join(TRIGGERS)}"
        )
    if filters["since"] and filters["since"] not in SINCE:
        raise FilterError(f"since {filters['since']!r:.40}: choose one of {', '.join(SINCE)}")
    oldest = container.clock() - SINCE[filters["since"]] if filters["since"] else None
    cursor = parse_cursor(request.arg("before"))
    if query and cursor is None:
        exact = _exact(container, query)
        if exact is not None:
            matches = _matching(exact, filters, status, oldest)
            return RunsPage([exact] if matches else [], filters, None, first=True)
    found: list[RunRecord] = []
    more = True
    for _ in range(MAX_READS):
        batch = container.runs.list_runs(
            filters["workflow"] or None, status, limit=size, before=cursor
        )
        more = len(batch) == size
        for run in batch:
            if oldest is not None and run.created_at < oldest:
                more = False
                break
            if filters["trigger"] and run.trigger.type != filters["trigger"]:
                continue
            if query and not _starts(run.run_id, query):
                continue
            found.append(run)
        if batch:
            cursor = (batch[-1].created_at, batch[-1].run_id)
        if len(found) >= size or not more:
            break
    found = found[:size]
    next_cursor = format_cursor(found[-1]) if (found and (more or len(found) == size)) else None
    # One timeline read per queued run on the page (a page holds at most PAGE_SIZE).
    waiting = {
        run.run_id: why_waiting(run, container.runs.get_timeline(run.run_id))
        for run in found
        if run.status is RunStatus.queued
    }
    return RunsPage(found, filters, next_cursor, first=not request.arg("before"), waiting=waiting)


def why_waiting(run: RunRecord, events: list[TimelineEvent]) -> str:
    """Why a queued run has not started: the key whose slots are taken and its place in line
    (a workflow's ``concurrency``), the slot a ``throttle`` delayed it to, else that its
    execution has not started yet."""
    for event in reversed(events):
        if event.type is TimelineEventType.resource_waiting and "until" in event.detail:
            resource = str(event.detail.get("resource", ""))
            rule = event.detail.get("reason") or "flow control"
            return f"delayed by {resource} ({rule}): starts at {event.detail['until']}"
        if event.type is TimelineEventType.resource_waiting:
            resource = str(event.detail.get("resource", ""))
            place = event.detail.get("position")
            rule = event.detail.get("reason") or "a resource"
            return (
                f"waits for a slot of {resource} ({rule}): place {place} in line when it "
                "arrived; it starts when a run of that key ends"
            )
    return "waits for its execution to start"


def newer_runs(
    container: Any, request: Request, *, size: int = PAGE_SIZE
) -> tuple[list[RunRecord], bool]:
    """Runs of the first page's filters started after ``after`` (the newest run a page shows),
    newest first, and whether they are all of them (``False``: more than a page; reload).

    Raises:
        FilterError: a filter or the cursor is not one the console knows.
    """
    after = parse_cursor(request.arg("after"))
    first = Request("GET", request.path, {k: v for k, v in request.query.items() if k in (
        "workflow", "status", "trigger", "since", "q")}, request.headers)  # fmt: skip
    page = runs_page(container, first, size=size)
    newer = [r for r in page.runs if after is None or (r.created_at, r.run_id) > after]
    return newer, len(newer) < size or page.next_cursor is None


def run_row(run: RunRecord) -> dict[str, Any]:
    """A run as the runs list's live rows carry it (JSON; the page builds the row as text)."""
    took = (run.ended_at - run.created_at).total_seconds() if run.ended_at else None
    return {
        "run_id": run.run_id,
        "workflow_id": run.workflow_id,
        "workflow_version": run.workflow_version,
        "status": run.status.value,
        "trigger": run.trigger.type,
        "created_at": run.created_at.astimezone(UTC).isoformat(),
        "took_seconds": took,
        "cost": run_cost(run),
        "error": error_snippet(run),
        "cursor": format_cursor(run),
    }


def run_cost(run: RunRecord) -> str:
    """What a run cost, as the runs list shows it (``—``: nothing priced)."""
    return format_usd(run.cost_usd) if run.cost_usd else "—"


def error_snippet(run: RunRecord) -> str:
    """The start of a run's error, redacted, for the runs list (empty when it has none)."""
    if run.error is None:
        return ""
    return shown(f"{run.error.type}: {run.error.message}", limit=SNIPPET_CHARS)


def _query(value: str) -> str:
    """A search as given: a run id or the start of one (``run-`` may be left out)."""
    if len(value) > MAX_QUERY or not all(c.isalnum() or c in "-_" for c in value):
        raise FilterError(
            f"search {value[:40]!r}: type a run id or its start (letters, digits and '-')"
        )
    return value.lower()


def _starts(run_id: str, query: str) -> bool:
    return run_id.startswith(query) or run_id.startswith(f"run-{query}")


def _exact(container: Any, query: str) -> RunRecord | None:
    """The run whose whole id the search is, if any (one read, whatever the run's age)."""
    for run_id in (query, f"run-{query}"):
        try:
            return container.runs.get_run(run_id)  # type: ignore[no-any-return]
        except NotFoundError:
            continue
    return None


def _matching(
    run: RunRecord, filters: dict[str, str], status: RunStatus | None, oldest: datetime | None
) -> bool:
    """Whether a run found by its id also matches the other filters."""
    return (
        (not filters["workflow"] or run.workflow_id == filters["workflow"])
        and (status is None or run.status is status)
        and (not filters["trigger"] or run.trigger.type == filters["trigger"])
        and (oldest is None or run.created_at >= oldest)
    )


def _status(value: str) -> RunStatus | None:
    if not value:
        return None
    try:
        return RunStatus(value)
    except ValueError:
        raise FilterError(f"status {value!r:.40}: choose one of {', '.join(STATUSES)}") from None


def format_cursor(run: RunRecord) -> str:
    """The page cursor after ``run``: its creation time and id."""
    return f"{run.created_at.astimezone(UTC).isoformat()}|{run.run_id}"


def parse_cursor(value: str) -> tuple[datetime, str] | None:
    """A cursor back into ``(created_at, run_id)`` (``None`` when empty).

    Raises:
        FilterError: a cursor that is not one this console made.
    """
    if not value:
        return None
    at, _, run_id = value.partition("|")
    try:
        moment = datetime.fromisoformat(at)
    except ValueError:
        raise FilterError("the page cursor is not valid: start from the first page") from None
    if moment.tzinfo is None or not run_id:
        raise FilterError("the page cursor is not valid: start from the first page")
    return moment, run_id


def graph_of(container: Any, workflow_id: str, version: int | None) -> StepGraph | None:
    """The resolved topology of a stored workflow version (``None`` if it cannot resolve)."""
    from langorch.domain.plan.topology import step_graph

    plan = container.definitions.get_workflow(workflow_id, version)
    if plan is None:
        return None
    try:
        return step_graph(plan, container.definitions)
    except LangorchError:
        return None


def workflow_view(container: Any, workflow_id: str, request: Request) -> dict[str, Any]:
    """The workflow page: versions (the active one first shown and marked), the chosen one's
    graph and triggers, a diff, the last promotions, a start form.

    Raises:
        NotFoundError: no such workflow or version.
    """
    stored = container.definitions.versions("workflow", workflow_id)
    if not stored:
        raise NotFoundError(f"workflow {workflow_id} does not exist")
    by_version = {s.version: s for s in stored}
    latest = stored[-1].version
    active_plan = container.definitions.get_workflow(workflow_id)
    active = None if active_plan is None else active_plan.version
    version = _version(request.arg("version"), latest if active is None else active)
    if version not in by_version:
        raise NotFoundError(f"workflow {workflow_id} has no version {version}")
    plan: TaskPlan = by_version[version].definition
    graph = graph_of(container, workflow_id, version)
    against = _version(request.arg("diff"), 0) if request.arg("diff") else None
    diff: list[tuple[str, str]] = []
    if against is not None:
        if against not in by_version:
            raise NotFoundError(f"workflow {workflow_id} has no version {against}")
        diff = plan_diff(by_version[against].definition, plan)
    return {
        "plan": plan,
        "versions": stored,
        "version": version,
        "latest": latest,
        "active": active,
        "promotions": container.definitions.promotions(workflow_id)[-5:],
        "graph": graph_svg(graph) if graph is not None else None,
        "diff": diff,
        "against": against,
        "fields": input_fields(plan),
        "yaml": plan_yaml(plan),
        "cost": workflow_cost(container, workflow_id),
    }


COST_RUNS = 100
"""How many of a workflow's latest runs its page sums the cost of."""


def workflow_cost(container: Any, workflow_id: str) -> dict[str, Any]:
    """What the workflow's latest runs (at most :data:`COST_RUNS`) cost: in all, on average,
    and the dearest run."""
    runs = container.runs.list_runs(workflow_id=workflow_id, limit=COST_RUNS)
    total = sum(r.cost_usd for r in runs)
    dearest = max(runs, key=lambda r: r.cost_usd, default=None)
    return {
        "runs": len(runs),
        "total": format_usd(total),
        "average": format_usd(total / len(runs)) if runs else "—",
        "dearest": dearest.run_id if dearest is not None and dearest.cost_usd else None,
        "dearest_cost": format_usd(dearest.cost_usd) if dearest is not None else "—",
    }


def _version(value: str, default: int) -> int:
    if not value:
        return default
    if not value.isdigit():
        raise FilterError(f"version {value!r:.20} is not a number")
    return int(value)


def plan_yaml(plan: TaskPlan) -> str:
    """The definition as people write it (defaults left out)."""
    document = plan.model_dump(mode="json", exclude_defaults=True)
    return yaml.safe_dump(document, sort_keys=False, allow_unicode=True, width=100)


def plan_diff(old: TaskPlan, new: TaskPlan) -> list[tuple[str, str]]:
    """A unified diff of two versions' YAML: ``(css class, line)`` pairs."""
    lines = difflib.unified_diff(
        plan_yaml(old).splitlines(),
        plan_yaml(new).splitlines(),
        f"version {old.version}",
        f"version {new.version}",
        lineterm="",
        n=3,
    )
    styled = []
    for line in lines:
        kind = {"+": "add", "-": "del", "@": "hunk"}.get(line[:1], "ctx")
        if line.startswith(("+++", "---")):
            kind = "file"
        styled.append((kind, line))
    return styled


def input_fields(plan: TaskPlan) -> list[dict[str, Any]]:
    """The start form's fields, one per property of the inputs schema."""
    schema = plan.inputs_schema
    if schema is None:
        return []
    fields = []
    for name, spec in schema.properties.items():
        kind = str(spec.get("type", "string"))
        widget = {
            "integer": "number",
            "number": "number",
            "boolean": "checkbox",
            "array": "json",
            "object": "json",
        }.get(kind, "text")
        if "enum" in spec:
            widget = "select"
        default = spec.get("default")
        fields.append(
            {
                "name": name,
                "type": kind,
                "widget": widget,
                "required": name in schema.required,
                "description": str(spec.get("description", "")),
                "options": [str(o) for o in spec.get("enum", [])],
                "step": "1" if kind == "integer" else "any",
                "default": ""
                if default is None
                else (default if isinstance(default, str) else json.dumps(default)),
            }
        )
    return fields


def status_class(status: str) -> Markup:
    """A status as a CSS class name (from the fixed set of statuses)."""
    return Markup(status if status in STATUSES else "unknown")  # noqa: S704 - fixed set
