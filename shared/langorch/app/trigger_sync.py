"""Use-cases that keep a workflow's triggers in step with its definition.

* :func:`sync_triggers` / :func:`register_and_sync` — after a workflow is stored: its webhook
  secret (created once, shown once) and its EventBridge Scheduler schedules.
* :func:`rotate_webhook_secret` — a new current secret; the old one stays valid as previous.

What starts runs from those triggers is :mod:`langorch.app.triggers`.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from os.path import commonprefix
from pathlib import Path
from secrets import token_bytes
from typing import TYPE_CHECKING, Literal, Protocol

from langorch.domain.definitions import TaskPlan
from langorch.domain.errors import (
    DefinitionError,
    NotFoundError,
    Problem,
    SecretNotFoundError,
)
from langorch.domain.triggers import (
    DesiredSchedule,
    desired_schedules,
    schedule_name,
    schedule_problems,
)
from langorch.domain.webhooks import format_secret

if TYPE_CHECKING:
    from langorch.app.definitions import DefinitionsStore, RegisterResult
    from langorch.app.ports import (
        AgentStore,
        ScheduleStore,
        SecretsStore,
        ToolServerStore,
        WorkflowSource,
    )
    from langorch.config import Settings

logger = logging.getLogger(__name__)


# --------------------------------------------------------------------------------------------
# The ports each use-case needs
# --------------------------------------------------------------------------------------------


class SyncDeps(Protocol):
    """What syncing a workflow's triggers needs: its secret and its schedules."""

    @property
    def settings(self) -> Settings: ...
    @property
    def secrets(self) -> SecretsStore: ...
    @property
    def schedules(self) -> ScheduleStore: ...


class RegisterDeps(SyncDeps, Protocol):
    """What registering definitions needs: :class:`SyncDeps`, the definitions store and the
    registered tools (a block may name them in ``tools_required``)."""

    @property
    def definitions(self) -> DefinitionsStore: ...
    @property
    def tool_servers(self) -> ToolServerStore: ...
    @property
    def agents(self) -> AgentStore: ...


class RotateDeps(Protocol):
    """What rotating a webhook secret needs: the workflow and its secret."""

    @property
    def settings(self) -> Settings: ...
    @property
    def definitions(self) -> WorkflowSource: ...
    @property
    def secrets(self) -> SecretsStore: ...


# --------------------------------------------------------------------------------------------
# Results
# --------------------------------------------------------------------------------------------


ScheduleAction = Literal["created", "updated", "unchanged", "deleted"]


@dataclass(frozen=True)
class ScheduleChange:
    """What registering did to one schedule."""

    name: str
    action: ScheduleAction
    expression: str | None = None
    timezone: str | None = None


@dataclass
class TriggerSync:
    """What :func:`sync_triggers` did for one workflow.

    Attributes:
        workflow_id: the workflow.
        secret_name: its webhook secret's name, when it has a webhook trigger.
        webhook_secret: the secret's value, **only** when this call created it (show it once).
        schedules: each schedule created, updated, left unchanged or deleted.
        warnings: what could not be done and why (e.g. schedules not configured).
    """

    workflow_id: str
    secret_name: str | None = None
    webhook_secret: str | None = None
    schedules: list[ScheduleChange] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


@dataclass
class RegisteredBatch:
    """What :func:`register_and_sync` stored and synced, and the definitions' warnings."""

    results: list[RegisterResult]
    triggers: list[TriggerSync]
    warnings: list[Problem] = field(default_factory=list)


# --------------------------------------------------------------------------------------------
# Secrets and schedules
# --------------------------------------------------------------------------------------------


def new_webhook_secret() -> str:
    """A fresh Standard Webhooks secret: ``whsec_`` + base64 of 256 random bits."""
    return format_secret(token_bytes(32))


def sync_triggers(
    plan: TaskPlan,
    deps: SyncDeps,
    *,
    new_secret: Callable[[], str] = new_webhook_secret,
) -> TriggerSync:
    """Make the cloud side of a stored workflow's triggers match it.

    * A webhook trigger gets a secret (``webhook_secret_prefix`` + workflow id) when it has
      none; its value is returned once, here. An existing secret is kept, and a secret is
      kept when the trigger is removed (adding it back keeps senders working).
    * Each schedule trigger gets an EventBridge Scheduler schedule ``langorch-<workflow_id>``
      (AWS cron, its timezone, ``FlexibleTimeWindow`` off, the trigger function as target);
      changed ones are updated, and schedules of triggers that are gone are deleted.

    Args:
        plan: the stored workflow version (its latest).
        deps: the settings, the secrets and the schedules.
        new_secret: makes a secret's value (tests pass a fixed one).

    Returns:
        What was done.

    Raises:
        DefinitionError: a schedule trigger cannot be written as an AWS cron expression.
        StorageError: Secrets Manager or the Scheduler failed.
    """
    sync = TriggerSync(plan.plan_id)
    if any(t.type == "webhook" for t in plan.all_triggers()):
        name = deps.settings.webhook_secret_prefix + plan.plan_id
        sync.secret_name = name
        if not deps.secrets.exists(name):
            value = new_secret()
            deps.secrets.put_json(
                name,
                {"current": value},
                description=f"langorch webhook secret of workflow {plan.plan_id}",
            )
            sync.webhook_secret = value
            logger.info("webhook secret created", extra={"workflow_id": plan.plan_id})
    problems = schedule_problems(plan)
    if problems:
        raise DefinitionError(f"workflow {plan.plan_id}", problems)
    _sync_schedules(plan, desired_schedules(plan), deps, sync)
    return sync


def _sync_schedules(
    plan: TaskPlan, desired: list[DesiredSchedule], deps: SyncDeps, sync: TriggerSync
) -> None:
    schedules = deps.schedules
    names = [schedule_name(plan.plan_id, i) for i in range(max(len(desired), 2))]
    prefix = commonprefix(names)  # noqa: RUF071 - names, not paths: a character prefix
    # A prefix can also match another workflow's schedules (langorch-a, langorch-ab): the
    # Input says whose each one is.
    existing = {
        s.name: s for s in schedules.list(prefix) if s.input.get("workflow_id") == plan.plan_id
    }
    if desired and not schedules.configured:
        sync.warnings.append(
            f"workflow {plan.plan_id} has schedule triggers but no schedule was written: set "
            "LANGORCH_TRIGGER_FUNCTION_ARN and LANGORCH_SCHEDULER_ROLE_ARN"
        )
    elif desired:
        schedules.ensure_group()
        for want in desired:
            have = existing.get(want.name)
            if have is not None and (
                have.expression == want.expression
                and have.timezone == want.timezone
                and have.input == want.input
                and have.target_arn == deps.settings.trigger_function_arn
                and have.role_arn == deps.settings.scheduler_role_arn
                and have.dead_letter_arn == deps.settings.schedule_dlq_arn
            ):
                action: ScheduleAction = "unchanged"
            else:
                created = schedules.put(
                    want.name,
                    want.expression,
                    want.timezone,
                    want.input,
                    description=f"langorch workflow {plan.plan_id}: {want.cron} ({want.timezone})",
                    # A paused schedule stays paused when its workflow changes.
                    state=have.state if have is not None else "ENABLED",
                )
                action = "created" if created else "updated"
            sync.schedules.append(ScheduleChange(want.name, action, want.expression, want.timezone))
    wanted = {d.name for d in desired}
    for name in sorted(set(existing) - wanted):
        schedules.delete(name)
        sync.schedules.append(ScheduleChange(name, "deleted"))
    for change in sync.schedules:
        logger.info(
            f"schedule {change.action}",
            extra={"workflow_id": plan.plan_id, "schedule": change.name},
        )


def register_and_sync(
    paths: Sequence[str | Path],
    deps: RegisterDeps,
    *,
    strict: bool = False,
    tools: frozenset[str] | None = None,
    draft: bool = False,
) -> RegisteredBatch:
    """Validate and store definition files, then sync every stored workflow's triggers.

    With ``draft`` the new workflow versions are stored without being activated, and no
    trigger is synced: triggers start the active version, which has not changed
    (``workflows promote`` syncs them).

    Schedules EventBridge Scheduler cannot express are reported with the other problems,
    before anything is stored.

    Args:
        paths: definition files (YAML or JSON).
        deps: the ports it needs.
        strict: count the definitions' warnings as errors.
        tools: the tools bound in this deployment (``None``: the built-ins and the tools
            registered in ``deps.tool_servers``); a block needing
            another is a warning.
        draft: store the workflows as drafts (see above).

    Returns:
        The stored definitions and, per workflow, what its triggers' sync did.

    Raises:
        DefinitionError: any file has any problem; nothing was stored.
        StorageError: a backend failed.
    """
    # Imported here: registration pulls in validation and the LLM registry's names, which the
    # trigger function never needs.
    from langorch.app.definitions import register_files, validate_files
    from langorch.app.tool_registry import known_tool_names

    bound = known_tool_names(deps.tool_servers) if tools is None else tools
    agents = deps.agents.list()
    batch = validate_files(paths, deps.definitions, strict=strict, tools=bound, agents=agents)
    problems: list[Problem] = []
    for plan in batch.workflows:
        where = f"{batch.sources[('workflow', plan.plan_id)]}: workflow {plan.plan_id}: "
        problems.extend(Problem(where + p.path, p.message, p.hint) for p in schedule_problems(plan))
    if problems:
        raise DefinitionError(str(paths[0]) if len(paths) == 1 else f"{len(paths)} files", problems)
    results = register_files(
        deps.definitions, paths, tools=bound, agents=agents, activate=not draft
    )
    # Triggers start the active version: a put of content identical to a draft leaves it a
    # draft, so the version synced is the store's active one, not the one put.
    active = [
        deps.definitions.get_workflow(r.id) for r in results if r.kind == "workflow" and not draft
    ]
    synced = [sync_triggers(plan, deps) for plan in active if plan is not None]
    return RegisteredBatch(results, synced, batch.warnings)


def rotate_webhook_secret(
    workflow_id: str,
    deps: RotateDeps,
    *,
    new_secret: Callable[[], str] = new_webhook_secret,
) -> str:
    """Give a workflow's webhook a new current secret; the old current becomes previous.

    Both verify until the next rotation, so senders can switch without failed deliveries.

    Args:
        workflow_id: the workflow (it must have a webhook trigger).
        deps: the ports it needs.
        new_secret: makes the new value.

    Returns:
        The new secret (show it once).

    Raises:
        NotFoundError: no such workflow, or it has no webhook trigger.
    """
    plan = deps.definitions.get_workflow(workflow_id)
    if plan is None:
        raise NotFoundError(f"workflow {workflow_id} not found")
    if not any(t.type == "webhook" for t in plan.all_triggers()):
        raise NotFoundError(f"workflow {workflow_id} has no webhook trigger")
    name = deps.settings.webhook_secret_prefix + workflow_id
    try:
        current = deps.secrets.get_json(name, fresh=True).get("current")
    except SecretNotFoundError:
        current = None
    value = new_secret()
    document = {"current": value}
    if isinstance(current, str) and current:
        document["previous"] = current
    deps.secrets.put_json(
        name, document, description=f"langorch webhook secret of workflow {workflow_id}"
    )
    logger.info("webhook secret rotated", extra={"workflow_id": workflow_id})
    return value
