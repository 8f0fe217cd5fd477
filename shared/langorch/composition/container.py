"""The composition root: settings in, wired adapters and engine out.

Everything is built on first use, so a function that only starts runs never imports LangGraph
or an LLM SDK (ARCHITECTURE §2 "Cold starts"). Tests and the local stack build a container with
their own ``Settings`` (endpoint, names) — nowhere else swaps endpoints.

This is the only module that knows which implementation stands behind each port
(:mod:`langorch.app.ports`): the use-cases declare the ports they need, and the container
satisfies them structurally (``container.runs`` is a ``RunsStore``, ``container.executions`` an
``Executions``, ...). Use-case tests pass in-memory fakes instead (``tests/fakes``).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from datetime import UTC, datetime
from functools import cached_property
from typing import TYPE_CHECKING, Any

from langorch.config import Settings

if TYPE_CHECKING:
    import boto3
    from slack_sdk import WebClient

    from langorch.adapters.artifacts import S3Artifacts, S3ArtifactWriter
    from langorch.adapters.dead_letters import SqsDeadLetters
    from langorch.adapters.dynamodb.agents import AgentsRepository
    from langorch.adapters.dynamodb.approvals.repository import ApprovalsRepository
    from langorch.adapters.dynamodb.budgets import BudgetCountersRepository
    from langorch.adapters.dynamodb.checkpoint_slots import SlotClaims
    from langorch.adapters.dynamodb.checkpointer import DynamoCheckpointSaver
    from langorch.adapters.dynamodb.definitions import DefinitionsRepository
    from langorch.adapters.dynamodb.resources import ResourceLocksRepository
    from langorch.adapters.dynamodb.runs import RunsRepository
    from langorch.adapters.dynamodb.tasks import TasksRepository
    from langorch.adapters.dynamodb.tool_servers import ToolServersRepository
    from langorch.adapters.files import S3Bucket, S3FileReader
    from langorch.adapters.logs import CloudWatchLogs
    from langorch.adapters.scheduler import ApprovalTimerSchedules, Schedules
    from langorch.adapters.secrets import Secrets
    from langorch.adapters.slack import SlackRequestVerifier
    from langorch.adapters.stepfunctions import StepFunctions
    from langorch.adapters.sts import CallerIdentity
    from langorch.app.memory import MemoryManager
    from langorch.app.ports import (
        ApprovalNotifier,
        EmailSender,
        EventBus,
        Handoff,
        ToolConnector,
    )
    from langorch.app.traces import RunTraces
    from langorch.domain.prices import PriceTable
    from langorch.domain.tool_policies import ToolPolicy
    from langorch.engine.compiler import GraphCompiler
    from langorch.engine.context import Downloader, HttpCaller
    from langorch.llm import LLMRegistry


def _utcnow() -> datetime:
    return datetime.now(UTC)


def _new_id() -> str:
    return uuid.uuid4().hex


def _key_in(document: dict[str, Any], provider: str, settings: Settings) -> str | None:
    """``provider``'s key in the deployment's LLM secret: ``<provider>_api_key``, else
    ``api_key`` (OpenAI's, or the default provider's when that is Anthropic)."""
    value = document.get(f"{provider}_api_key")
    if not value and (provider == "openai" or settings.default_llm_provider == provider):
        value = document.get("api_key")
    return str(value) if value else None


class Container:
    """Adapters, engine and clock for one process (one Lambda sandbox, one CLI call)."""

    def __init__(
        self,
        settings: Settings,
        *,
        session: boto3.Session | None = None,
        clock: Callable[[], datetime] = _utcnow,
        ids: Callable[[], str] = _new_id,
        llm: LLMRegistry | None = None,
        http: HttpCaller | None = None,
        email: EmailSender | None = None,
    ) -> None:
        self.settings = settings
        self._session = session
        self.clock = clock
        self.ids = ids
        if llm is not None:
            self.__dict__["llm"] = llm
        if http is not None:
            self.__dict__["http"] = http
        if email is not None:
            self.__dict__["email"] = email

    def client(self, service: str, *, role: str | None = None) -> Any:
        """A boto3 client at the configured endpoint (cached per service and role).

        Args:
            service: boto3 service name.
            role: a role ARN whose credentials the client uses (assumed on first use,
                refreshed before they expire); ``None``: the process's credentials.
        """
        cache: dict[tuple[str, str | None], Any] = self.__dict__.setdefault("_clients", {})
        if (service, role) not in cache:
            # Imported here: a container on the embedded stores (the CLI against a local home)
            # may never build a client, and boto3 costs a command a third of a second.
            from langorch.adapters.aws import make_client, new_session

            if role:
                from langorch.adapters.aws import assumed_role_session

                session = assumed_role_session(self.settings, role)
            else:
                # One session for all of this container's clients: each costs ~55 ms (P3).
                self._session = session = self._session or new_session(self.settings)
            cache[service, role] = make_client(service, self.settings, session=session)
        return cache[service, role]

    @cached_property
    def definitions(self) -> DefinitionsRepository:
        from langorch.adapters.dynamodb.definitions import DefinitionsRepository

        return DefinitionsRepository(self.client("dynamodb"), self.settings.definitions_table)

    @cached_property
    def runs(self) -> RunsRepository:
        from langorch.adapters.dynamodb.runs import RunsRepository

        return RunsRepository(self.client("dynamodb"), self.settings.runs_table)

    @cached_property
    def checkpoint_slots(self) -> SlotClaims:
        """What a segment's lease and an operator's pause write into the checkpoints table: a
        marker in the run's next checkpoint slot (the checkpointer's, kept apart so what a
        process claimed is known to every saver it builds)."""
        from langorch.adapters.dynamodb.checkpoint_slots import SlotClaims

        return SlotClaims(self.client("dynamodb"), self.settings.checkpoints_table)

    @cached_property
    def tool_servers(self) -> ToolServersRepository:
        """Registered tools (MCP servers), beside the definitions."""
        from langorch.adapters.dynamodb.tool_servers import ToolServersRepository

        return ToolServersRepository(self.client("dynamodb"), self.settings.definitions_table)

    @cached_property
    def agents(self) -> AgentsRepository:
        """Registered agents (seed 001 §7), beside the definitions."""
        from langorch.adapters.dynamodb.agents import AgentsRepository

        return AgentsRepository(self.client("dynamodb"), self.settings.definitions_table)

    @cached_property
    def tasks(self) -> TasksRepository:
        """Steps' recorded calls (seed 001 §5), in the runs table."""
        from langorch.adapters.dynamodb.tasks import TasksRepository

        return TasksRepository(self.client("dynamodb"), self.settings.runs_table)

    @cached_property
    def resources(self) -> ResourceLocksRepository:
        from langorch.adapters.dynamodb.resources import ResourceLocksRepository

        return ResourceLocksRepository(
            self.client("dynamodb"),
            self.settings.runs_table,
            max_waiters=self.settings.resource_queue_cap,
        )

    @cached_property
    def checkpointer(self) -> DynamoCheckpointSaver:
        from langorch.adapters.dynamodb.checkpointer import DynamoCheckpointSaver

        ttl_days = self.settings.checkpoint_ttl_days
        # Segments pass their lease's fence; the saver takes the thread's next slot with each
        # write, and asks the runs store for the run's fence only when it finds no lease
        # marker of its own (the run's first lease writes none). Named through a local, so
        # the IAM-from-code analysis (tests/infra/aws_calls.py), which gives each property one
        # table setting, keeps this saver's writes on the checkpoints table.
        runs_table = self.settings.runs_table
        return DynamoCheckpointSaver(
            self.client("dynamodb"),
            self.settings.checkpoints_table,
            s3_client=self.client("s3"),
            bucket=self.settings.bucket,
            key_prefix=self.settings.checkpoint_prefix,
            ttl_seconds=ttl_days * 86_400 if ttl_days else None,
            runs_table=runs_table,
            slots=self.checkpoint_slots,
            fences=self.runs,
        )

    @cached_property
    def memory_store(self) -> Any:
        from langorch.adapters.dynamodb.memory import build_memory_store

        return build_memory_store(self.client("dynamodb"), self.settings.memory_table)

    @cached_property
    def memory(self) -> MemoryManager:
        from langorch.app.memory import MemoryManager

        settings = self.settings
        if not settings.memory_embedding_model:
            return MemoryManager(self.memory_store)
        from langorch.llm.embeddings import LazyEmbeddings
        from langorch.llm.settings import OpenAISettings

        embeddings = LazyEmbeddings(
            settings.memory_embedding_model,
            openai_api_key=self._openai_key,
            openai=OpenAISettings(
                base_url=settings.openai_base_url, organization=settings.openai_organization
            ),
            bedrock_client_factory=self._bedrock_client,
        )
        return MemoryManager(
            self.memory_store, embeddings=embeddings, min_score=settings.memory_min_score
        )

    @cached_property
    def stepfunctions(self) -> StepFunctions:
        from langorch.adapters.stepfunctions import StepFunctions

        return StepFunctions(self.client("stepfunctions"), self.settings.state_machine_arn)

    @property
    def executions(self) -> StepFunctions:
        """The run state machine's executions (the ``Executions`` port): :attr:`stepfunctions`."""
        return self.stepfunctions

    @cached_property
    def secrets(self) -> Secrets:
        from langorch.adapters.secrets import Secrets

        return Secrets(self.client("secretsmanager"))

    @cached_property
    def approvals(self) -> ApprovalsRepository:
        from langorch.adapters.dynamodb.approvals.repository import ApprovalsRepository

        return ApprovalsRepository(self.client("dynamodb"), self.settings.runs_table)

    @cached_property
    def email(self) -> EmailSender:
        """SES; in local mode (``outbox_dir`` set) the outbox folder instead."""
        if self.settings.outbox_dir:
            from langorch.adapters.outbox import OutboxSender

            return OutboxSender(self.settings.outbox_dir)
        from langorch.adapters.ses import SesSender

        return SesSender(
            self.client("ses"),
            sender=self.settings.sender_email,
            configuration_set=self.settings.ses_configuration_set,
        )

    @cached_property
    def notifiers(self) -> dict[str, ApprovalNotifier]:
        """The chat channels approval requests can be posted to (Slack; Teams: not yet).

        The Slack bot token is read from its secret on Slack's first call, so a stack that never
        posts to Slack never reads it.
        """
        from langorch.adapters.slack import SlackNotifier

        return {
            "slack": SlackNotifier(
                self._slack_client,
                conversation=self.settings.slack_channel,
                users=self.settings.slack_users,
            )
        }

    def _slack_client(self) -> WebClient:
        from langorch.adapters.slack import slack_credentials, web_client

        token = slack_credentials(self.secrets, self.settings.slack_secret).get("bot_token")
        if not token:
            from langorch.adapters.slack import SlackNotConfiguredError

            raise SlackNotConfiguredError(
                f"secret {self.settings.slack_secret} has no bot_token (see the README, "
                "'Approvals in Slack')"
            )
        return web_client(token, self.settings.slack_base_url)

    @cached_property
    def dead_letters(self) -> SqsDeadLetters:
        """The stack's dead-letter queues and their target (``langorch queues redrive``)."""
        from langorch.adapters.dead_letters import SqsDeadLetters, parse_queues

        queues = parse_queues(self.settings.dead_letter_queues)
        target = self.settings.trigger_function_arn
        return SqsDeadLetters(self.client("sqs"), self.client("lambda"), queues, target)

    @cached_property
    def handoff(self) -> Handoff:
        """Work acknowledged now and done out of the request: the function invokes itself
        asynchronously (Slack's button presses)."""
        from langorch.adapters.handoff import LambdaHandoff

        return LambdaHandoff(self.client("lambda"))

    @cached_property
    def slack_requests(self) -> SlackRequestVerifier:
        """Checks Slack's signature on interaction requests (signing secret read on first use)."""
        from langorch.adapters.slack import SlackRequestVerifier

        return SlackRequestVerifier(self._slack_signing_secret, lambda: self.clock().timestamp())

    def _slack_signing_secret(self) -> str:
        from langorch.adapters.slack import SlackNotConfiguredError, slack_credentials

        secret = slack_credentials(self.secrets, self.settings.slack_secret).get("signing_secret")
        if not secret:
            raise SlackNotConfiguredError(
                f"secret {self.settings.slack_secret} has no signing_secret (see the README, "
                "'Approvals in Slack')"
            )
        return secret

    @cached_property
    def schedules(self) -> Schedules:
        from langorch.adapters.scheduler import Schedules

        return Schedules(
            self.client("scheduler"),
            group=self.settings.scheduler_group,
            role_arn=self.settings.scheduler_role_arn,
            target_arn=self.settings.trigger_function_arn,
            dead_letter_arn=self.settings.schedule_dlq_arn,
        )

    @cached_property
    def approval_timers(self) -> ApprovalTimerSchedules:
        from langorch.adapters.scheduler import ApprovalTimerSchedules

        return ApprovalTimerSchedules(self.schedules)

    def _openai_key(self) -> str | None:
        if self.settings.openai_api_key:
            return self.settings.openai_api_key
        if self.settings.llm_api_key_secret:
            document = self.secrets.get_json(self.settings.llm_api_key_secret)
            return _key_in(document, "openai", self.settings)
        return None

    def _anthropic_key(self) -> str | None:
        if self.settings.anthropic_api_key:
            return self.settings.anthropic_api_key
        if self.settings.llm_api_key_secret:
            document = self.secrets.get_json(self.settings.llm_api_key_secret)
            return _key_in(document, "anthropic", self.settings)
        return None

    @cached_property
    def llm(self) -> LLMRegistry:
        from langorch.llm import LLMRegistry
        from langorch.llm.settings import AnthropicSettings, BedrockSettings, OpenAISettings

        settings = self.settings
        return LLMRegistry(
            default_provider=settings.default_llm_provider,
            default_model=settings.default_llm_model,
            default_max_tokens=settings.default_llm_max_tokens,
            default_temperature=settings.default_llm_temperature,
            offline_script=settings.offline_script,
            openai_api_key=self._openai_key,
            openai=OpenAISettings(
                base_url=settings.openai_base_url,
                organization=settings.openai_organization,
                project=settings.openai_project,
                timeout_seconds=settings.openai_timeout_seconds,
            ),
            bedrock=BedrockSettings(
                region=settings.bedrock_region or settings.region,
                inference_profile=settings.bedrock_inference_profile,
                guardrail_id=settings.bedrock_guardrail_id,
                guardrail_version=settings.bedrock_guardrail_version,
            ),
            bedrock_client_factory=self._bedrock_client,
            anthropic_api_key=self._anthropic_key,
            anthropic=AnthropicSettings(
                base_url=settings.anthropic_base_url,
                timeout_seconds=settings.anthropic_timeout_seconds,
            ),
        )

    @cached_property
    def budgets(self) -> BudgetCountersRepository:
        """The workflows' day and month spend, in the runs table."""
        from langorch.adapters.dynamodb.budgets import BudgetCountersRepository

        return BudgetCountersRepository(self.client("dynamodb"), self.settings.runs_table)

    @cached_property
    def prices(self) -> PriceTable:
        """The deployment's LLM prices: the shipped table, under the price file if one is set."""
        from langorch.domain.prices import PriceTable

        table = PriceTable.shipped()
        if not self.settings.prices_file:
            return table
        from langorch.adapters.prices import read_prices

        return table.merged(read_prices(self.settings.prices_file))

    @cached_property
    def deployment_tool_policies(self) -> list[ToolPolicy]:
        """The deployment's tool-call rules: the tool-policy file's (none when unset)."""
        if not self.settings.tool_policies_file:
            return []
        from langorch.adapters.prices import read_tool_policies

        return read_tool_policies(self.settings.tool_policies_file)

    @cached_property
    def traces(self) -> RunTraces:
        """Where runs' OpenTelemetry spans go (``otel_exporter``); off by default, and then the
        OpenTelemetry SDK is never imported (X-Ray through Powertools stays the tracer)."""
        from langorch.app.traces import NO_TRACES

        exporter = self.settings.otel_exporter
        if exporter == "none":
            return NO_TRACES
        try:
            from langorch.adapters.otel import otel_traces
        except ImportError as exc:
            raise ImportError(
                f"otel_exporter={exporter!r} needs the OpenTelemetry SDK: "
                "pip install 'langorch[otel]' (or set LANGORCH_OTEL_EXPORTER=none)"
            ) from exc
        return otel_traces(
            exporter, endpoint=self.settings.otel_endpoint, content=self.settings.trace_content
        )

    def _bedrock_client(self, read_timeout: float) -> Any:
        # Not self.client(): Bedrock is never the emulator, and never its fake credentials
        # (nor this container's session, which is the emulator's under `runs start --local`):
        # the standard credential chain.
        from langorch.adapters.aws import bedrock_runtime_client

        settings = self.settings
        return bedrock_runtime_client(
            region=settings.bedrock_region or settings.region,
            read_timeout=read_timeout,
            endpoint_url=settings.bedrock_endpoint_url,
        )

    @cached_property
    def http(self) -> HttpCaller:
        from langorch.adapters.http import http_call

        return http_call

    @property
    def tool_connector(self) -> ToolConnector:
        """Opens MCP sessions to registered tool servers (the SDK is imported on first call)."""
        from langorch.adapters.mcp import McpConnection

        return McpConnection

    @cached_property
    def files(self) -> S3FileReader:
        """What ``read_file`` steps read with: the files bucket, bounded reads — with the file
        reader role when one is set, which IAM denies every key under the checkpoint prefix."""
        from langorch.adapters.files import S3FileReader

        return S3FileReader(
            self.client("s3", role=self.settings.file_reader_role_arn),
            bucket=self.settings.bucket,
            checkpoint_prefix=self.settings.checkpoint_prefix,
        )

    @cached_property
    def events(self) -> EventBus:
        """EventBridge, where ``langorch events send`` puts events."""
        from langorch.adapters.eventbridge import EventBridgeBus

        return EventBridgeBus(self.client("events"))

    @cached_property
    def artifact_writer(self) -> S3ArtifactWriter:
        """Where ``attach`` steps keep files: the files bucket under ``artifacts/`` (the
        runner's role may only put there)."""
        from langorch.adapters.artifacts import S3ArtifactWriter

        return S3ArtifactWriter(self.client("s3"), bucket=self.settings.bucket)

    @cached_property
    def artifacts(self) -> S3Artifacts:
        """Runs' attached files as ``runs show`` and the console list, link and read them
        (with the operator's credentials)."""
        from langorch.adapters.artifacts import S3Artifacts

        return S3Artifacts(self.client("s3"), bucket=self.settings.bucket)

    @property
    def download(self) -> Downloader:
        """What ``attach`` steps download ``url`` sources with."""
        from langorch.adapters.http import http_download

        return http_download

    @cached_property
    def bucket(self) -> S3Bucket:
        """The drop bucket, where ``langorch files put`` uploads."""
        from langorch.adapters.files import S3Bucket

        return S3Bucket(self.client("s3"), bucket=self.settings.bucket)

    @cached_property
    def logs(self) -> CloudWatchLogs:
        """The functions' log lines (``langorch runs logs`` reads a run's)."""
        from langorch.adapters.logs import CloudWatchLogs

        return CloudWatchLogs(self.client("logs"))

    @cached_property
    def caller(self) -> CallerIdentity:
        """Whose AWS credentials this container uses (the console's operator on a stack)."""
        from langorch.adapters.sts import CallerIdentity

        return CallerIdentity(self.client("sts"))

    @cached_property
    def compiler(self) -> GraphCompiler:
        from langorch.engine.compiler import GraphCompiler

        return GraphCompiler(self.definitions, self.checkpointer)

    def ensure_resources(self) -> None:
        """Create the tables and the bucket when missing (local stack and tests only)."""
        from langorch.adapters.dynamodb.memory import create_memory_table
        from langorch.adapters.s3 import ensure_bucket

        self.definitions.create_table()
        self.runs.create_table()
        self.checkpointer.setup()
        create_memory_table(self.client("dynamodb"), self.settings.memory_table)
        ensure_bucket(self.client("s3"), self.settings.bucket, self.settings.region)
