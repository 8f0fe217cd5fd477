"""The trigger use-cases' set-up on fakes: the same workflows, secret and clock as on moto."""

from __future__ import annotations

from typing import Any

from langorch.app.definitions import register_workflow
from langorch.app.triggers import WebhookRequest, accept_webhook
from langorch.domain.errors import LangorchError
from langorch.domain.loading import load_text
from langorch.web.errors import answer_for, http_status, outcome_status
from langorch.web.http import error_body
from tests.fakes import Fakes
from tests.integration.triggers_support import NOW, SCHEDULER_ROLE, SECRET, TRIGGER_FN, WORKFLOWS


def make_deps(**settings: Any) -> Fakes:
    """Fakes with the trigger tests' workflows and the invoices webhook secret."""
    deps = Fakes(
        seed_builtins=False,
        **{"trigger_function_arn": TRIGGER_FN, "scheduler_role_arn": SCHEDULER_ROLE, **settings},
    )
    deps.clock.set(NOW)
    for plan in load_text(WORKFLOWS, source="triggers.yaml", fmt="yaml").workflows:
        register_workflow(deps.definitions, plan)
    deps.secrets.put_json("langorch/webhooks/invoices", {"current": SECRET})
    return deps


def executions(deps: Fakes) -> list[dict[str, Any]]:
    """Every execution of the run state machine (``name`` and ``input``)."""
    return [
        {"name": name, "input": deps.executions.describe(name)["input"]}
        for name in deps.executions.names
    ]


def all_runs(deps: Fakes) -> list[Any]:
    """Every run record, of any workflow."""
    return deps.runs.list_runs(limit=1000)


def webhook_answer(request: WebhookRequest, deps: Fakes) -> tuple[int, dict[str, Any]]:
    """A delivery's status and body as the trigger handler answers it (``web.errors`` maps)."""
    try:
        started = accept_webhook(request, deps)
    except LangorchError as exc:
        if answer_for(exc) is None:
            raise
        return http_status(exc), error_body(exc)
    return outcome_status(started), {"run_id": started.run_id, "created": started.created}
