"""The langorch stack: composes one construct per capability and publishes the outputs."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from aws_cdk import ArnFormat, CfnOutput, Stack
from aws_cdk import aws_iam as iam
from aws_cdk import aws_sns_subscriptions as subscriptions
from constructs import Construct

from infra.config import DeployConfig
from infra.constructs.edge import public_api
from infra.constructs.email import Email
from infra.constructs.functions import SEGMENT_BUDGET_SECONDS, Functions
from infra.constructs.keys import StackKey, encrypt_with
from infra.constructs.network import Network
from infra.constructs.observability import Observability
from infra.constructs.operators import RecoveryOperatorPolicy
from infra.constructs.secrets import Secrets
from infra.constructs.storage import FilesBucket
from infra.constructs.tables import Tables
from infra.constructs.triggers import Triggers
from infra.constructs.workflow import RunStateMachine
from infra.nag import suppress

CHECKPOINT_PREFIX = "checkpoints"


class LangorchStack(Stack):
    """Everything one langorch deployment needs; no resource is defined here directly.

    Args:
        config: the deployment's settings.
        build_dir: where Lambda assets are staged before synthesis copies them.
    """

    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        config: DeployConfig,
        build_dir: Path,
        **kwargs: Any,
    ) -> None:
        super().__init__(scope, id, **kwargs)
        self.config = config
        prefix = config.prefix
        self.tables = Tables(
            self,
            "Tables",
            retain_data=config.retain_data,
            full_index_projection=config.runs_indexes == "full",
        )
        self.files = FilesBucket(
            self,
            "Files",
            checkpoint_prefix=CHECKPOINT_PREFIX,
            checkpoint_ttl_days=config.checkpoint_ttl_days,
            log_retention_days=config.log_retention_days,
            retain_data=config.retain_data,
        )
        self.secrets = Secrets(self, "Secrets", prefix=prefix)
        self.email = Email(
            self,
            "Email",
            prefix=prefix,
            sender_email=config.sender_email,
            domain=config.ses_domain,
            create_identity=config.ses_identity == "create",
            enabled=config.email,
        )
        self.functions = Functions(
            self,
            "Functions",
            prefix=prefix,
            build_dir=build_dir,
            bundle=config.bundle,
            python312=config.python312,
            log_retention_days=config.log_retention_days,
            tables=self.tables,
            files=self.files,
            secrets=self.secrets,
            email=self.email,
            bedrock_models=config.models_to_grant,
            bedrock_regions=config.bedrock_regions,
            bedrock_marketplace_products=config.bedrock_marketplace_products,
            snap_start=config.snap_start,
            runner_extras=config.runner_extras,
            runner_tools=bool(config.mcp_servers),
        )
        self.workflow = RunStateMachine(
            self,
            "Runs",
            prefix=prefix,
            run_segment=self.functions.runner_alias,
            request_approval=self.functions.request_approval,
            log_level=config.sfn_log_level,
            log_retention_days=config.log_retention_days,
        )
        state_machine = self.workflow.state_machine
        state_machine.grant_start_execution(self.functions.trigger)
        # The reconcile pass reads how each open run's execution ended: DescribeExecution on
        # this state machine's executions (named by the run id), by name rather than through
        # grant_execution, whose ARN is a split of the state machine's.
        self.executions_arn = self.format_arn(
            service="states",
            resource="execution",
            resource_name=f"{prefix}-runs:*",
            arn_format=ArnFormat.COLON_RESOURCE_NAME,
        )
        # The approval callback reads whether a run's execution goes on when a click finds
        # its task closed (the decision waits for the run's next park instead of "too late").
        for reader in (self.functions.trigger, self.functions.approval_callback):
            iam.Grant.add_to_principal(
                grantee=reader,
                actions=["states:DescribeExecution"],
                resource_arns=[self.executions_arn],
            )
        # A start under `singleton: cancel_running`, `debounce` or `batch` cancels the run it
        # replaces, whose execution the trigger stops (the executions of this machine only).
        iam.Grant.add_to_principal(
            grantee=self.functions.trigger,
            actions=["states:StopExecution"],
            resource_arns=[self.executions_arn],
        )
        # A run that continues as new while an operator cancels it stops the execution it has
        # just started (app/continuation.py): the executions of this machine only.
        iam.Grant.add_to_principal(
            grantee=self.functions.run_segment,
            actions=["states:StopExecution"],
            resource_arns=[self.executions_arn],
        )
        # A run that ends starts the next run waiting for its concurrency key. By name: the
        # state machine invokes the runner, so a reference to it from the runner's role would
        # be a cycle.
        iam.Grant.add_to_principal(
            grantee=self.functions.run_segment,
            actions=["states:StartExecution"],
            resource_arns=[
                self.format_arn(
                    service="states",
                    resource="stateMachine",
                    resource_name=f"{prefix}-runs",
                    arn_format=ArnFormat.COLON_RESOURCE_NAME,
                )
            ],
        )
        # The HTTP API, or with `waf` a REST API behind a web ACL (infra/constructs/edge.py).
        self.api = public_api(
            self,
            config,
            trigger=self.functions.trigger,
            approval_callback=self.functions.approval_callback,
        )
        if self.email.events is not None:
            # Bounces and complaints of approval emails escalate their approval (issue 34).
            self.email.events.add_subscription(
                subscriptions.LambdaSubscription(self.functions.trigger)
            )
        self.triggers = Triggers(
            self,
            "Triggers",
            prefix=prefix,
            trigger=self.functions.trigger,
            files=self.files,
            reconcile_minutes=config.reconcile_minutes,
            event_workflows=config.event_workflows,
        )
        public_base_url = (config.public_base_url or self.api.url).rstrip("/")
        # Approvals' reminders and escalations are one-time schedules aimed at the trigger
        # function (issue 13). Its ARN is spelled from its name, not referenced: the state
        # machine invokes request_approval and the trigger names the state machine, so a
        # reference would close a dependency cycle.
        trigger_arn = self.format_arn(
            service="lambda",
            resource="function",
            resource_name=self.functions.function_name("trigger"),
            arn_format=ArnFormat.COLON_RESOURCE_NAME,
        )
        for function in (
            self.functions.trigger,
            self.functions.request_approval,
            self.functions.approval_callback,
        ):
            self.triggers.grant_approval_timers(function)
            function.add_environment("LANGORCH_TRIGGER_FUNCTION_ARN", trigger_arn)
            function.add_environment(
                "LANGORCH_SCHEDULER_ROLE_ARN", self.triggers.scheduler_role.role_arn
            )

        self.functions.add_environment(
            {
                "LANGORCH_DEFINITIONS_TABLE": self.tables.definitions.table_name,
                "LANGORCH_RUNS_TABLE": self.tables.runs.table_name,
                "LANGORCH_CHECKPOINTS_TABLE": self.tables.checkpoints.table_name,
                "LANGORCH_MEMORY_TABLE": self.tables.memory.table_name,
                "LANGORCH_BUCKET": self.files.bucket.bucket_name,
                "LANGORCH_CHECKPOINT_PREFIX": CHECKPOINT_PREFIX,
                "LANGORCH_CHECKPOINT_TTL_DAYS": str(config.checkpoint_ttl_days),
                "LANGORCH_SEGMENT_BUDGET_SECONDS": str(SEGMENT_BUDGET_SECONDS),
                "LANGORCH_DEFAULT_LLM_PROVIDER": config.llm_provider,
                # Settings() parses list settings from JSON (langorch.config).
                "LANGORCH_DEFAULT_APPROVERS": json.dumps(list(config.default_approvers)),
                "LANGORCH_PUBLIC_BASE_URL": public_base_url,
                "LANGORCH_SENDER_EMAIL": config.sender_email,
                "LANGORCH_SES_CONFIGURATION_SET": (self.email.configuration_set_name),
                # Secret ARNs, never values: the handlers read them from Secrets Manager.
                "LANGORCH_LINK_SIGNING_SECRET": self.secrets.link_signing_key.secret_arn,
                "LANGORCH_LLM_API_KEY_SECRET": self.secrets.llm_api_key.secret_arn,
                "LANGORCH_WEBHOOK_SECRET_PREFIX": self.secrets.webhook_prefix,
                "LANGORCH_SLACK_SECRET": self.secrets.slack.secret_arn,
                "LANGORCH_APPROVAL_CHANNELS": json.dumps(list(config.approval_channels)),
                "LANGORCH_SCHEDULER_GROUP": self.triggers.schedule_group_name,
                "LANGORCH_LOG_GROUP_PREFIX": self.functions.log_group_prefix,
            }
        )
        if config.llm_model:
            self.functions.add_environment({"LANGORCH_DEFAULT_LLM_MODEL": config.llm_model})
        if config.slack_channel:
            self.functions.add_environment({"LANGORCH_SLACK_CHANNEL": config.slack_channel})
        # Only the functions that start or resume executions get the ARN: the state machine
        # invokes the runner and request_approval, so naming it in their environment would
        # make a dependency cycle.
        for function in (self.functions.trigger, self.functions.approval_callback):
            function.add_environment("LANGORCH_STATE_MACHINE_ARN", state_machine.state_machine_arn)
        # Tools over MCP: the runner calls only the configured servers and reads only the
        # configured header secrets (least privilege; `langorch tools add` registers them).
        self.functions.run_segment.add_environment(
            "LANGORCH_TOOL_SERVER_URLS", json.dumps(list(config.mcp_servers))
        )
        self.secrets.grant_read_tool_secrets(self.functions.run_segment, config.mcp_secrets)
        self._egress_and_traces(config)

        self.observability = Observability(
            self,
            "Observability",
            prefix=prefix,
            functions=self.functions.all,
            log_groups=list(self.functions.log_groups.values()),
            state_machine=state_machine,
            dead_letter_queues=self.triggers.dead_letter_queues,
            alarm_email=config.alarm_email,
            tables={
                "definitions": self.tables.definitions,
                "runs": self.tables.runs,
                "checkpoints": self.tables.checkpoints,
                "memory": self.tables.memory,
            },
            bedrock_models=config.models_to_grant,
            ses_configuration_set=self.email.configuration_set_name if config.email else None,
        )
        self.operators = RecoveryOperatorPolicy(
            self,
            "Operators",
            tables=self.tables,
            files=self.files,
            state_machine=state_machine,
            dead_letter_queues=list(self.triggers.dead_letter_queues.values()),
            trigger=self.functions.trigger,
        )
        # network: vpc — after every grant (the endpoints follow the functions' finished
        # policies), before the key (its log groups are encrypted like the others).
        self.network: Network | None = None
        if config.network == "vpc":
            self.network = Network(
                self,
                "Network",
                config=config,
                functions=list(self.functions.all.values()),
                assumed_roles=[self.functions.file_reader_role],
            )
        self.key: StackKey | None = None
        if config.kms != "managed":
            self.key = StackKey(
                self, "Key", setting=config.kms, retain_data=config.retain_data, prefix=prefix
            )
            encrypt_with(self, self.key.key, except_buckets=[self.files.access_logs])
        self._outputs(public_base_url)
        suppress(self)

    def _egress_and_traces(self, config: DeployConfig) -> None:
        """The runner's model limits (README, "Model limits"), domain allow-list and
        OpenTelemetry export (README, "Production checklist"): only the runner calls models and
        http steps' hosts, and exports run spans."""
        runner = self.functions.run_segment
        if config.model_limits:  # only the runner calls models (checked by DeployConfig)
            runner.add_environment("LANGORCH_MODEL_LIMITS", json.dumps(dict(config.model_limits)))
        domains = config.http_allowed_domains
        if domains is None and config.network == "vpc":
            # In a VPC the firewall passes only the allow-list: with none, the runner refuses
            # http steps itself, naming the setting, rather than leaving them to time out.
            domains = ()
        if domains is not None:
            runner.add_environment("LANGORCH_HTTP_ALLOWED_DOMAINS", json.dumps(list(domains)))
        if config.otel == "off":
            return
        runner.add_environment("LANGORCH_OTEL_EXPORTER", "otlp")
        if config.otel_endpoint:
            runner.add_environment("LANGORCH_OTEL_ENDPOINT", config.otel_endpoint)
        if config.trace_content:
            runner.add_environment("LANGORCH_TRACE_CONTENT", "true")
        if config.otel_layer_arn:
            from aws_cdk import aws_lambda as lambda_

            runner.add_layers(
                lambda_.LayerVersion.from_layer_version_arn(
                    self, "OtelCollectorLayer", config.otel_layer_arn
                )
            )

    def _outputs(self, public_base_url: str) -> None:
        # Read by `langorch … --stack NAME` (langorch.cli.target.OUTPUT_FIELDS): the keys are
        # a contract, rename none of them.
        outputs = {
            "DefinitionsTable": self.tables.definitions.table_name,
            "RunsTable": self.tables.runs.table_name,
            "CheckpointsTable": self.tables.checkpoints.table_name,
            "MemoryTable": self.tables.memory.table_name,
            "Bucket": self.files.bucket.bucket_name,
            "CheckpointPrefix": CHECKPOINT_PREFIX,
            "StateMachineArn": self.workflow.state_machine.state_machine_arn,
            "ApiUrl": self.api.url,
            "PublicBaseUrl": public_base_url,
            "TriggerFunctionArn": self.functions.trigger.function_arn,
            "SchedulerGroup": self.triggers.schedule_group_name,
            "SchedulerRoleArn": self.triggers.scheduler_role.role_arn,
            "ScheduleDlqArn": self.triggers.schedule_dlq.queue_arn,
            # `langorch queues redrive`: name=ARN pairs (langorch.adapters.dead_letters).
            "DeadLetterQueues": ",".join(
                f"{name}={queue.queue_arn}"
                for name, queue in self.triggers.dead_letter_queues.items()
            ),
            "LinkSigningSecret": self.secrets.link_signing_key.secret_arn,
            "LlmApiKeySecret": self.secrets.llm_api_key.secret_arn,
            "WebhookSecretPrefix": self.secrets.webhook_prefix,
            "SlackSecret": self.secrets.slack.secret_arn,
            "SenderEmail": self.email.sender_email,
            "SesConfigurationSet": self.email.configuration_set_name,
            "LogGroupPrefix": self.functions.log_group_prefix,
            "AlarmTopicArn": self.observability.topic.topic_arn,
            "DashboardName": self.observability.dashboard.dashboard_name,
            # Attach to the people who run `langorch runs redrive | fork` and `langorch queues
            # redrive` with `--stack …`.
            "OperatorRecoveryPolicyArn": self.operators.policy.managed_policy_arn,
        }
        for key, value in outputs.items():
            CfnOutput(self, key, value=value)
