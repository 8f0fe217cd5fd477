"""Read models of the runs list and the workflow pages.

The runs list pages through the runs table's indexes with a cursor (``before``: the last run
of the page shown), so page N costs one indexed query whatever N is. Workflow and status
filters are index queries; trigger and time filters are applied to the pages read, reading on
(a bounded number of pages) until a page is full.
"""

from __future__ import annotations

import difflib
import json
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import yaml
from markupsafe import Markup

from langorch.console.drawing import graph_svg
from langorch.console.http import Request
from langorch.domain.definitions import TaskPlan
from langorch.domain.errors import LangorchError, NotFoundError
from langorch.domain.plan.graph import StepGraph
from langorch.domain.runs import RunRecord, RunStatus

PAGE_SIZE = 50
MAX_READS = 20
"""Index pages read at most for one page of a filtered listing."""
STATUSES = [s.value for s in RunStatus]
TRIGGERS = ["manual", "webhook", "schedule", "s3", "subflow"]
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


def runs_page(container: Any, request: Request, *, size: int = PAGE_SIZE) -> RunsPage:
    """The runs page the request asks for (filters ``workflow``, ``status``, ``trigger``,
    ``since``; cursor ``before``).

    Raises:
        FilterError: a filter value the console does not know.
    """
    filters = {k: request.arg(k) for k in ("workflow", "status", "trigger", "since")}
    status = _status(filters["status"])
    if filters["trigger"] and filters["trigger"] not in TRIGGERS:
        raise FilterError(
            f"trigger {filters['trigger']!r:.40}: choose one of {', '.join(TRIGGERS)}"
        )
    if filters["since"] and filters["since"] not in SINCE:
        raise FilterError(f"since {filters['since']!r:.40}: choose one of {', '.join(SINCE)}")
    oldest = container.clock() - SINCE[filters["since"]] if filters["since"] else None
    cursor = parse_cursor(request.arg("before"))
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
            found.append(run)
        if batch:
            cursor = (batch[-1].created_at, batch[-1].run_id)
        if len(found) >= size or not more:
            break
    found = found[:size]
    next_cursor = format_cursor(found[-1]) if (found and (more or len(found) == size)) else None
    return RunsPage(found, filters, next_cursor, first=not request.arg("before"))


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
    """The workflow page: versions, the chosen one's graph and triggers, a diff, a start form.

    Raises:
        NotFoundError: no such workflow or version.
    """
    stored = container.definitions.versions("workflow", workflow_id)
    if not stored:
        raise NotFoundError(f"workflow {workflow_id} does not exist")
    by_version = {s.version: s for s in stored}
    latest = stored[-1].version
    version = _version(request.arg("version"), latest)
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
        "graph": graph_svg(graph) if graph is not None else None,
        "diff": diff,
        "against": against,
        "fields": input_fields(plan),
        "yaml": plan_yaml(plan),
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
