"""The console's routes: one function per page or action, over the stack's stores.

Pages read through the same adapters the CLI uses
(:class:`~langorch.composition.container.Container`) with the operator's credentials, so IAM decides
what the console may see and do. Actions go through the same use-cases as everything else:
``cancel_run``, ``launch_run`` and the approval page's ``view_approval``/``decide_approval``
(:mod:`.actions`), in the name of the console's one :class:`~.operator.Operator`.

Nothing but the package's static files is answered without a session, and a session is opened
only by the start-up token (:mod:`.http`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from functools import cached_property
from importlib.resources import files
from typing import Any
from urllib.parse import quote, unquote, urlencode

from jinja2 import Environment, PackageLoader, StrictUndefined
from markupsafe import Markup

from langorch.app.approvals.quality import approval_quality
from langorch.app.artifacts import find_artifact
from langorch.console import actions, listing
from langorch.console.http import (
    CSRF_FIELD,
    SECURITY_HEADERS,
    SESSION_COOKIE,
    TOKEN_PARAM,
    CsrfError,
    Request,
    Response,
    Sessions,
    session_cookie,
)
from langorch.console.operator import Operator, OperatorError
from langorch.console.runview import build_run_view
from langorch.console.slackview import slack_preview
from langorch.domain.artifacts import Artifact, ArtifactError, content_disposition, human_size
from langorch.domain.errors import LangorchError, NotFoundError, StorageError
from langorch.web.errors import REFUSED, answer_for
from langorch.web.look import human_label, shown, stylesheet, verbatim

Route = Callable[[Request, re.Match[str]], Response]

MAX_BADGE = 100
"""Pending approvals counted for the badge (more reads "100+")."""

QUALITY_LIMIT = 500
"""Approvals the quality page reads (each costs its audit trail's read)."""

STATIC_TYPES = {
    ".css": "text/css; charset=utf-8",
    ".js": "text/javascript; charset=utf-8",
    ".svg": "image/svg+xml",
}


class ConsoleApp:
    """Answers console requests against one stack.

    Args:
        container: the stack's composition root (stores, executions, secrets, clock).
        target: how the stack is named on every page ("the local stack", "stack prod").
        origins: the console's own origins (``http://127.0.0.1:PORT``), for the CSRF check.
        operator: who the console acts for (every action is done and audited in their name).
        sessions: the start-up token, sessions and CSRF tokens (default: fresh for this process).
        cookie: the session cookie's name (one per port: cookies are shared by a host's ports).
    """

    def __init__(
        self,
        container: Any,
        target: str,
        origins: frozenset[str],
        operator: Operator,
        sessions: Sessions | None = None,
        cookie: str = SESSION_COOKIE,
    ) -> None:
        self.container = container
        self.target = target
        self.origins = origins
        self.operator = operator
        self.sessions = sessions or Sessions()
        self.cookie = cookie
        self._routes: list[tuple[str, re.Pattern[str], Route]] = [
            ("GET", re.compile(r"/"), lambda r, m: Response.redirect("/runs")),
            ("GET", re.compile(r"/runs"), self.runs),
            ("GET", re.compile(r"/runs/([^/]+)"), self.run),
            ("GET", re.compile(r"/runs/([^/]+)/diff/([^/]+)"), self.diff),
            ("POST", re.compile(r"/runs/([^/]+)/cancel"), self.cancel),
            ("POST", re.compile(r"/runs/([^/]+)/pause"), self.pause),
            ("POST", re.compile(r"/runs/([^/]+)/resume"), self.resume),
            ("POST", re.compile(r"/runs/([^/]+)/redrive"), self.redrive),
            ("POST", re.compile(r"/runs/([^/]+)/fork"), self.fork),
            ("GET", re.compile(r"/runs/([^/]+)/artifacts/([^/]+)/([^/]+)"), self.artifact),
            ("GET", re.compile(r"/api/status"), self.status),
            ("GET", re.compile(r"/api/runs"), self.newer),
            ("GET", re.compile(r"/approvals"), self.approvals),
            ("GET", re.compile(r"/approvals/quality"), self.approval_quality),
            ("GET", re.compile(r"/approvals/([^/]+)"), self.approval),
            ("POST", re.compile(r"/approvals/([^/]+)"), self.decide),
            ("GET", re.compile(r"/workflows"), self.workflows),
            ("GET", re.compile(r"/workflows/([^/]+)"), self.workflow),
            ("POST", re.compile(r"/workflows/([^/]+)/runs"), self.start),
            ("GET", re.compile(r"/static/([a-z0-9_.-]+)"), self.static),
        ]

    # ---------------------------------------------------------------------------------------
    # Dispatch
    # ---------------------------------------------------------------------------------------

    def handle(self, request: Request) -> Response:
        """Route one request of a session; the start-up token opens one, and without one only
        static files are served. Named errors become pages, CSRF failures a 403."""
        if not request.path.startswith("/static/"):
            if TOKEN_PARAM in request.query:
                return self.sign_in(request)
            if not self.sessions.valid(request.session):
                return self.signed_out(request)
        return self.route(request)

    def sign_in(self, request: Request) -> Response:
        """The start-up URL: a session cookie for its token, and the same page without it."""
        session = self.sessions.open(request.arg(TOKEN_PARAM)) if request.method == "GET" else None
        if session is None:
            return self.page(
                "error.html",
                request,
                status=403,
                signed_out=True,
                heading="Not this console's link",
                message="This link's token does not open this console. Use the URL the console "
                "printed when it started (a restarted console prints a new one).",
            )
        rest = [(k, v) for k, values in request.query.items() if k != TOKEN_PARAM for v in values]
        location = request.path + (f"?{urlencode(rest)}" if rest else "")
        response = Response.redirect(location)
        response.headers["Set-Cookie"] = session_cookie(session, self.cookie)
        return response

    def signed_out(self, request: Request) -> Response:
        """A request without a session of this console: refused, with how to get one."""
        if request.path.startswith("/api/"):
            return Response(401, b'{"error": "no console session"}', "application/json")
        return self.page(
            "error.html",
            request,
            status=401,
            signed_out=True,
            heading="Open the console from its start-up link",
            message="This console answers only the browser that opened the link it printed "
            "when it started (the link carries a token; after it, a cookie keeps you signed "
            "in). Open that link again, or restart the console for a new one.",
        )

    def route(self, request: Request) -> Response:
        """Route one request (its session checked); named errors become pages."""
        allowed: list[str] = []
        for method, pattern, route in self._routes:
            match = pattern.fullmatch(request.path)
            if match is None:
                continue
            if method != request.method and not (method == "GET" and request.method == "HEAD"):
                allowed.append(method)
                continue
            try:
                if method == "POST":
                    self.sessions.check(request, self.origins)
                return route(request, match)
            except (CsrfError, OperatorError) as exc:
                return self.page(
                    "error.html", request, status=403, heading="Refused", message=str(exc)
                )
            except LangorchError as exc:
                # The web edge's one table answers; a refusal it has no row for is still the
                # use-case refusing what the operator asked.
                answer = answer_for(exc) or REFUSED
                return self.page(
                    "error.html",
                    request,
                    status=answer.status,
                    heading=answer.title_for(exc),
                    message=str(exc),
                )
        if allowed:
            return Response(405, b"method not allowed", "text/plain", {"Allow": ", ".join(allowed)})
        return self.page(
            "error.html",
            request,
            status=404,
            heading="Not found",
            message=f"nothing at {request.path}",
        )

    @cached_property
    def env(self) -> Environment:
        env = Environment(
            loader=PackageLoader("langorch.console", "templates"),
            autoescape=True,
            undefined=StrictUndefined,
            trim_blocks=True,
            lstrip_blocks=True,
            finalize=shown,  # titles and names cannot reorder themselves (bidi controls)
        )
        env.filters["label"] = human_label
        env.filters["verbatim"] = verbatim
        env.filters["when"] = _when
        env.filters["ago"] = _ago
        env.filters["seconds"] = _seconds
        env.filters["filesize"] = human_size
        env.filters["snippet"] = listing.error_snippet
        env.filters["cost"] = listing.run_cost
        env.filters["cursor"] = listing.format_cursor
        env.globals["nav"] = [
            ("/runs", "Runs"),
            ("/approvals", "Approvals"),
            ("/workflows", "Workflows"),
        ]
        return env

    def page(
        self,
        template: str,
        request: Request,
        *,
        status: int = 200,
        signed_out: bool = False,
        **values: Any,
    ) -> Response:
        """A rendered page with the session's CSRF token for its forms and who is acting.

        ``signed_out``: a page for a request without a session, which shows nothing of the
        stack (no operator, no counts, no links into it).
        """
        body = self.env.get_template(template).render(
            target=self.target,
            path=request.path,
            csrf_field=CSRF_FIELD,
            csrf=self.sessions.token(request.session) if request.session else "",
            now=self.container.clock(),
            signed_out=signed_out,
            operator=None if signed_out else self.operator,
            waiting=0 if signed_out else self.pending_count(),
            **values,
        )
        return Response(status, body.encode("utf-8"))

    def pending_count(self) -> int:
        """Approvals waiting for a decision (the badge on Approvals), up to a page of them."""
        return len(self.container.approvals.list(pending_only=True, limit=MAX_BADGE))

    # ---------------------------------------------------------------------------------------
    # Runs
    # ---------------------------------------------------------------------------------------

    def runs(self, request: Request, _: re.Match[str]) -> Response:
        found = listing.runs_page(self.container, request)
        workflows = sorted(p.plan_id for p in self.container.definitions.list_workflows())
        return self.page(
            "runs.html",
            request,
            listing=found,
            workflows=workflows,
            statuses=listing.STATUSES,
            triggers=listing.TRIGGERS,
        )

    def run(self, request: Request, match: re.Match[str]) -> Response:
        run_id = match.group(1)
        run = self.container.runs.get_run(run_id)
        events = self.container.runs.get_timeline(run_id)
        graph = listing.graph_of(self.container, run.workflow_id, run.workflow_version)
        view = build_run_view(run, events, graph, self.container.clock())
        artifacts: list[tuple[Artifact, str]] = []
        artifacts_error = ""
        try:
            artifacts = [(a, _download_path(a)) for a in self.container.artifacts.list(run_id)]
        except (StorageError, ArtifactError) as exc:  # the page still shows the run
            artifacts_error = f"The attached files cannot be listed: {exc}"
        approvals = [
            (a, self.container.approvals.audit(a.approval_id))
            for a in self.container.approvals.list(run_id=run_id, limit=50)
        ]
        return self.page(
            "run.html",
            request,
            view=view,
            approvals=approvals,
            artifacts=artifacts,
            artifacts_error=artifacts_error,
            recovery=True,
            message=request.arg("done"),
            why_waiting=listing.why_waiting(run, events) if run.status.value == "queued" else "",
        )

    def diff(self, request: Request, match: re.Match[str]) -> Response:
        """Two runs side by side (``langorch runs diff``): steps, decisions, outputs."""
        from langorch.domain.run_diff import diff_runs

        runs = self.container.runs
        a, b = match.group(1), match.group(2)
        found = diff_runs(
            runs.get_run(a), runs.get_timeline(a), runs.get_run(b), runs.get_timeline(b)
        )
        return self.page("run_diff.html", request, diff=found)

    def artifact(self, request: Request, match: re.Match[str]) -> Response:
        """One of the run's files, as a download.

        Only a file the run's listing returns is served (:func:`find_artifact`): the path's
        parts are compared with what the store lists, never joined into a path or key, so
        ``..``, an encoded ``/`` or another key of the bucket finds nothing (404).
        """
        run_id, step_id, name = (unquote(part) for part in match.groups())
        self.container.runs.get_run(run_id)  # an unknown run is a 404 before any listing
        found = find_artifact(run_id, step_id, name, self.container.artifacts)
        data = self.container.artifacts.read(found)
        headers = {
            "Content-Disposition": content_disposition(found.name),
            # Never rendered here, whatever its type says: a download, in a sandbox if opened.
            "Content-Security-Policy": "default-src 'none'; sandbox",
        }
        return Response(200, data, found.content_type, headers)

    def cancel(self, request: Request, match: re.Match[str]) -> Response:
        run_id = actions.cancel(
            self.container, self.operator, match.group(1), request.field("reason")
        )
        return Response.redirect(f"/runs/{_quote(run_id)}?done=cancelled")

    def pause(self, request: Request, match: re.Match[str]) -> Response:
        run_id = match.group(1)
        state = actions.pause(self.container, self.operator, run_id, request.field("reason"))
        done = {"paused": "paused", "pausing": "pausing", "ended": "ended"}[state]
        return Response.redirect(f"/runs/{_quote(run_id)}?done={done}")

    def resume(self, request: Request, match: re.Match[str]) -> Response:
        run_id = match.group(1)
        resumed = actions.resume(self.container, self.operator, run_id, request.field("reason"))
        return Response.redirect(
            f"/runs/{_quote(run_id)}?done={'resumed' if resumed else 'not-paused'}"
        )

    def redrive(self, request: Request, match: re.Match[str]) -> Response:
        run_id = actions.redrive(
            self.container,
            self.operator,
            match.group(1),
            request.field("from_step"),
            request.field("reason"),
        )
        return Response.redirect(f"/runs/{_quote(run_id)}?done=redriven")

    def fork(self, request: Request, match: re.Match[str]) -> Response:
        forked = actions.fork(
            self.container,
            self.operator,
            match.group(1),
            request.field("at_step"),
            request.field("edits"),
            request.field("reason"),
        )
        return Response.redirect(f"/runs/{_quote(forked)}?done=forked")

    def newer(self, request: Request, _: re.Match[str]) -> Response:
        """Runs started since the runs page was shown (its live rows, polled)."""
        try:
            runs, complete = listing.newer_runs(self.container, request)
        except listing.FilterError as exc:
            return Response(400, json.dumps({"error": str(exc)}).encode(), "application/json")
        body = {"runs": [listing.run_row(r) for r in runs], "complete": complete}
        return Response(200, json.dumps(body).encode(), "application/json")

    def status(self, request: Request, _: re.Match[str]) -> Response:
        """``{run_id: status}`` for the runs a page shows (its live status, polled)."""
        ids = [i for i in request.query.get("id", [])[:200] if i]
        found: dict[str, str] = {}
        for run_id in ids:
            try:
                found[run_id] = self.container.runs.get_run(run_id).status.value
            except NotFoundError:
                continue
        return Response(200, json.dumps(found).encode(), "application/json")

    # ---------------------------------------------------------------------------------------
    # Approvals
    # ---------------------------------------------------------------------------------------

    def approvals(self, request: Request, _: re.Match[str]) -> Response:
        pending = self.container.approvals.list(pending_only=True, limit=200)
        recent = [a for a in self.container.approvals.list(limit=30) if not a.is_pending]
        return self.page("approvals.html", request, pending=pending, recent=recent[:15])

    def approval_quality(self, request: Request, _: re.Match[str]) -> Response:
        report = approval_quality(self.container.approvals, limit=QUALITY_LIMIT)
        return self.page("approval_quality.html", request, report=report, limit=QUALITY_LIMIT)

    def approval(self, request: Request, match: re.Match[str], **again: Any) -> Response:
        approval = self.container.approvals.get(match.group(1))
        if approval is None:
            raise NotFoundError(f"approval {match.group(1)} does not exist")
        form = actions.approval_form(approval, again.pop("values", None))
        deciders = self.operator.may_decide_for(approval)
        return self.page(
            "approval.html",
            request,
            status=again.pop("status", 200),
            approval=approval,
            form=form,
            deciders=deciders,
            own=self.operator.approver_in(approval),
            why_not="" if deciders else actions.why_not(self.operator, approval),
            audit=self.container.approvals.audit(approval.approval_id),
            slack=slack_preview(approval, self.container.settings),
            error=again.pop("error", None),
            message=request.arg("done"),
        )

    def decide(self, request: Request, match: re.Match[str]) -> Response:
        outcome = actions.decide(self.container, self.operator, match.group(1), request)
        if outcome.again is not None:
            return self.approval(
                request, match, status=outcome.status, error=outcome.again, values=outcome.values
            )
        return Response.redirect(f"/approvals/{_quote(match.group(1))}?done={outcome.done}")

    # ---------------------------------------------------------------------------------------
    # Workflows
    # ---------------------------------------------------------------------------------------

    def workflows(self, request: Request, _: re.Match[str]) -> Response:
        # Every stored workflow, drafts-only ones included (marked): the latest version of each
        # with its active one; steps, triggers and description are the latest's.
        stored = self.container.definitions.stored_workflows()
        return self.page("workflows.html", request, stored=stored)

    def workflow(self, request: Request, match: re.Match[str]) -> Response:
        view = listing.workflow_view(self.container, match.group(1), request)
        return self.page("workflow.html", request, **view)

    def start(self, request: Request, match: re.Match[str]) -> Response:
        run_id = actions.start(self.container, self.operator, match.group(1), request)
        return Response.redirect(f"/runs/{_quote(run_id)}?done=started")

    # ---------------------------------------------------------------------------------------
    # Files
    # ---------------------------------------------------------------------------------------

    def static(self, request: Request, match: re.Match[str]) -> Response:
        name = match.group(1)
        suffix = name[name.rfind(".") :]
        if name == "langorch.css":
            body = stylesheet().encode()
        else:
            resource = files("langorch.console").joinpath("static", name)
            if suffix not in STATIC_TYPES or not resource.is_file():
                return Response(404, b"not found", "text/plain")
            body = resource.read_bytes()
        headers = {"Cache-Control": "max-age=300"}
        return Response(200, body, STATIC_TYPES.get(suffix, "text/plain"), headers)


def headers_for(response: Response) -> dict[str, str]:
    """The response's headers with the security headers every answer carries."""
    merged = dict(SECURITY_HEADERS)
    merged.update(response.headers)
    merged["Content-Type"] = response.content_type
    return merged


def _quote(value: str) -> str:
    return quote(value, safe="")


def _download_path(artifact: Artifact) -> str:
    """The console's address of an artifact (each part percent-encoded, ``/`` included)."""
    parts = (artifact.run_id, artifact.step_id, artifact.name)
    return "/runs/{}/artifacts/{}/{}".format(*(_quote(p) for p in parts))


def _when(moment: datetime | None) -> Markup:
    """A moment as a ``<time>``: UTC as served (and on hover); the page shows it in the
    viewer's zone (``console.js``)."""
    if moment is None:
        return Markup("—")
    utc = moment.astimezone(UTC)
    text = utc.strftime("%Y-%m-%d %H:%M:%S UTC")
    return Markup('<time datetime="{}" title="{}">{}</time>').format(utc.isoformat(), text, text)


def _ago(moment: datetime | None, now: datetime | None = None) -> str:
    if moment is None:
        return "—"
    delta = (now or datetime.now(UTC)) - moment
    if delta < timedelta(seconds=60):
        return f"{max(int(delta.total_seconds()), 0)} s ago"
    if delta < timedelta(hours=1):
        return f"{int(delta.total_seconds() // 60)} min ago"
    if delta < timedelta(days=1):
        return f"{int(delta.total_seconds() // 3600)} h ago"
    return moment.astimezone(UTC).strftime("%Y-%m-%d")


def _seconds(value: float | int | None) -> str:
    if value is None:
        return "—"
    value = float(value)
    if value < 1:
        return f"{value * 1000:.0f} ms"
    if value < 120:
        return f"{value:.1f} s"
    return f"{value / 60:.1f} min"
