"""The embedded default: every store in one SQLite file and a folder under the home.

``langorch dev``, ``runs start --local``, the CLI and the console against a local home, and the
tests' local stack all build this container (``Settings.local_home`` set). Its stores are the
SQLite adapters (:mod:`langorch.adapters.sqlite`), held to the same contract suites as the
DynamoDB adapters; dropped files live in ``<home>/bucket/``. Only what AWS behaviour itself
stands for comes from the emulator: Step Functions executions (the run state machine's ASL,
interpreted by moto) at ``Settings.endpoint_url``. Approval emails go to the outbox folder.
"""

from __future__ import annotations

from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

from langorch.composition.container import Container
from langorch.domain.artifacts import ARTIFACTS_PREFIX

if TYPE_CHECKING:
    from langorch.adapters.emulator_stepfunctions import EmulatorStepFunctions
    from langorch.adapters.handoff import ThreadHandoff
    from langorch.adapters.local_artifacts import FolderArtifacts
    from langorch.adapters.local_events import LocalEventBus
    from langorch.adapters.local_files import FolderBucket
    from langorch.adapters.sqlite._db import Database
    from langorch.adapters.sqlite.agents import SqliteAgents
    from langorch.adapters.sqlite.approvals import SqliteApprovals
    from langorch.adapters.sqlite.budgets import SqliteBudgetCounters
    from langorch.adapters.sqlite.checkpointer import SqliteCheckpointSaver
    from langorch.adapters.sqlite.definitions import SqliteDefinitions
    from langorch.adapters.sqlite.logs import SqliteLogs
    from langorch.adapters.sqlite.resources import SqliteResourceLocks
    from langorch.adapters.sqlite.runs import SqliteRuns
    from langorch.adapters.sqlite.schedules import SqliteSchedules
    from langorch.adapters.sqlite.secrets import SqliteSecrets
    from langorch.adapters.sqlite.tasks import SqliteTasks
    from langorch.adapters.sqlite.tool_servers import SqliteToolServers
    from langorch.adapters.stepfunctions import StepFunctions

BUCKET_DIR = "bucket"
"""The drop bucket's folder under the home (``<home>/bucket/<key>``)."""


class EmbeddedContainer(Container):
    """A :class:`Container` whose stores are the home's SQLite file and bucket folder."""

    @property
    def home(self) -> Path:
        """The folder that holds everything (``Settings.local_home``)."""
        assert self.settings.local_home is not None
        return Path(self.settings.local_home)

    @cached_property
    def db(self) -> Database:
        """The home's SQLite file (``langorch.db``)."""
        from langorch.adapters.sqlite._db import DATABASE_FILE, Database

        return Database(self.home / DATABASE_FILE)

    @cached_property
    def definitions(self) -> SqliteDefinitions:  # type: ignore[override]
        from langorch.adapters.sqlite.definitions import SqliteDefinitions

        return SqliteDefinitions(self.db)

    @cached_property
    def runs(self) -> SqliteRuns:  # type: ignore[override]
        from langorch.adapters.sqlite.runs import SqliteRuns

        return SqliteRuns(self.db)

    @property
    def executions(self) -> EmulatorStepFunctions | StepFunctions:  # type: ignore[override]
        """The run state machine's executions: on the emulator at ``Settings.endpoint_url``
        without boto3 (a CLI command must not pay for it: issue 26), else Step Functions."""
        endpoint = self.settings.endpoint_url
        if not endpoint:
            return self.stepfunctions
        return self._emulator_executions

    @cached_property
    def _emulator_executions(self) -> EmulatorStepFunctions:
        from langorch.adapters.emulator_stepfunctions import EmulatorStepFunctions

        assert self.settings.endpoint_url is not None  # checked by ``executions``
        return EmulatorStepFunctions(
            self.settings.endpoint_url,
            self.settings.state_machine_arn,
            region=self.settings.region,
        )

    @cached_property
    def tool_servers(self) -> SqliteToolServers:  # type: ignore[override]
        from langorch.adapters.sqlite.tool_servers import SqliteToolServers

        return SqliteToolServers(self.db)

    @cached_property
    def agents(self) -> SqliteAgents:  # type: ignore[override]
        from langorch.adapters.sqlite.agents import SqliteAgents

        return SqliteAgents(self.db)

    @cached_property
    def tasks(self) -> SqliteTasks:  # type: ignore[override]
        from langorch.adapters.sqlite.tasks import SqliteTasks

        return SqliteTasks(self.db)

    @cached_property
    def budgets(self) -> SqliteBudgetCounters:  # type: ignore[override]
        """The workflows' day and month spend, in the home's database."""
        from langorch.adapters.sqlite.budgets import SqliteBudgetCounters

        return SqliteBudgetCounters(self.db)

    @cached_property
    def resources(self) -> SqliteResourceLocks:  # type: ignore[override]
        from langorch.adapters.sqlite.resources import SqliteResourceLocks

        return SqliteResourceLocks(self.db, max_waiters=self.settings.resource_queue_cap)

    @cached_property
    def checkpointer(self) -> SqliteCheckpointSaver:  # type: ignore[override]
        from langorch.adapters.sqlite.checkpointer import SqliteCheckpointSaver

        return SqliteCheckpointSaver(self.db)

    @cached_property
    def memory_store(self) -> Any:
        from langorch.adapters.sqlite.memory import build_memory_store

        return build_memory_store(self.db)

    @cached_property
    def secrets(self) -> SqliteSecrets:  # type: ignore[override]
        from langorch.adapters.sqlite.secrets import SqliteSecrets

        return SqliteSecrets(self.db)

    @cached_property
    def approvals(self) -> SqliteApprovals:  # type: ignore[override]
        from langorch.adapters.sqlite.approvals import SqliteApprovals

        return SqliteApprovals(self.db)

    @cached_property
    def schedules(self) -> SqliteSchedules:  # type: ignore[override]
        from langorch.adapters.sqlite.schedules import SqliteSchedules

        settings = self.settings
        return SqliteSchedules(
            self.db,
            group=settings.scheduler_group,
            role_arn=settings.scheduler_role_arn,
            target_arn=settings.trigger_function_arn,
            dead_letter_arn=settings.schedule_dlq_arn,
        )

    @cached_property
    def events(self) -> LocalEventBus:  # type: ignore[override]
        """The local buses: an event reaches the matching event triggers as EventBridge's
        rules would deliver it to the trigger function (the same envelope, the same use-case)."""
        from langorch.adapters.local_events import LocalEventBus
        from langorch.app.triggers import handle_event
        from langorch.domain.triggers import EventDelivered

        def deliver(envelope: dict[str, Any]) -> Any:
            return handle_event(EventDelivered.from_lambda_event(envelope), self)

        return LocalEventBus(self.definitions, deliver, region=self.settings.region)

    @cached_property
    def bucket(self) -> FolderBucket:  # type: ignore[override]
        """The drop bucket: files under ``<home>/bucket/``."""
        from langorch.adapters.local_files import FolderBucket

        return FolderBucket(self.home / BUCKET_DIR, bucket=self.settings.bucket)

    @cached_property
    def files(self) -> FolderBucket:  # type: ignore[override]
        """What ``read_file`` steps read: the bucket folder, bounded reads."""
        return self.bucket

    @cached_property
    def artifacts(self) -> FolderArtifacts:  # type: ignore[override]
        """Files runs attached: ``<home>/bucket/artifacts/`` (the same keys as in S3), or
        ``Settings.artifacts_dir``."""
        from langorch.adapters.local_artifacts import FolderArtifacts

        folder = self.settings.artifacts_dir
        return FolderArtifacts(
            Path(folder) if folder else self.home / BUCKET_DIR / ARTIFACTS_PREFIX
        )

    @cached_property
    def artifact_writer(self) -> FolderArtifacts:  # type: ignore[override]
        """Where ``attach`` steps keep files: :attr:`artifacts`."""
        return self.artifacts

    @cached_property
    def logs(self) -> SqliteLogs:  # type: ignore[override]
        from langorch.adapters.sqlite.logs import SqliteLogs

        return SqliteLogs(self.db)

    @cached_property
    def handoff(self) -> ThreadHandoff:  # type: ignore[override]
        """Handed-on work runs in this process (a sandbox's), on a worker thread: the local
        gateway acknowledges a Slack press as fast as the cloud does."""
        from langorch.adapters.handoff import ThreadHandoff

        return ThreadHandoff()

    def ensure_resources(self, *, engine: bool = True) -> None:
        """Create every store's tables and the bucket folder when missing.

        Args:
            engine: also the checkpoint and memory tables (LangGraph's). The local stack's
                start leaves them to the first segment (under the database's setup lock), so
                ``langorch dev`` never imports LangGraph on its way to ready.
        """
        stores = ("definitions", "runs", "tool_servers", "agents", "tasks", "resources", "secrets")
        for name in (*stores, "approvals", "schedules", "logs"):
            getattr(self, name)  # each store creates its tables when it is built
        self.schedules.ensure_group()  # approvals' wake-ups are put into it from the start
        self.bucket.ensure()
        if engine:
            self.checkpointer.setup()
            self.memory_store.setup()
