"""The four Lambda functions: one code asset, one runtime everywhere, and the dependency layers
each one imports (a base layer for all, the runner's own layer for the runner)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from aws_cdk import Duration, RemovalPolicy, Stack
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from aws_cdk import aws_secretsmanager as secretsmanager
from constructs import Construct

from infra.constructs.bundling import (
    ARCHITECTURE,
    BASE_LAYER,
    RUNNER_LAYER,
    RUNTIME,
    find_python312,
    layer_code,
    layer_requirements,
    stage_code,
)
from infra.constructs.email import Email
from infra.constructs.secrets import Secrets
from infra.constructs.storage import FilesBucket
from infra.constructs.tables import Tables
from infra.retention import retention_days
from langorch.adapters.dynamodb.approvals._items import AUDIT_PARTITION_PREFIX

SEGMENT_BUDGET_SECONDS = 600
"""A segment stops at the next step boundary after this long (``Settings``)..."""
RUNNER_TIMEOUT = Duration.minutes(15)
"""...and the runner's timeout leaves the step in flight five more minutes to finish."""


_PROFILE_GEOS = ("us.", "eu.", "apac.", "us-gov.", "ca.", "jp.", "au.", "global.")


def bedrock_model_arns(
    stack: Stack, models: tuple[str, ...], regions: tuple[str, ...]
) -> list[str]:
    """Exact ARNs for ``models``: a foundation model in the stack's region, or an inference
    profile plus its foundation model in every region it may route to.

    The Converse and InvokeModel APIs both authorize ``bedrock:InvokeModel`` against these.
    """
    arns: list[str] = []
    for model in models:
        geo = next((g for g in _PROFILE_GEOS if model.startswith(g)), None)
        if geo is None:
            arns.append(f"arn:{stack.partition}:bedrock:{stack.region}::foundation-model/{model}")
            continue
        arns.append(
            f"arn:{stack.partition}:bedrock:{stack.region}:{stack.account}"
            f":inference-profile/{model}"
        )
        base = model[len(geo) :]
        arns.extend(
            f"arn:{stack.partition}:bedrock:{region}::foundation-model/{base}" for region in regions
        )
        if geo == "global.":
            # A global profile routes to any commercial region: AWS documents the foundation
            # model's region-less ARN for it.
            arns.append(f"arn:{stack.partition}:bedrock:::foundation-model/{base}")
    return arns


def grant_bedrock_first_use(grantee: iam.IGrantable, product_ids: tuple[str, ...]) -> None:
    """Let the first invocation of a third-party (Marketplace) model subscribe the account.

    Bedrock subscribes the account to a third-party model on its first invocation, with the
    caller's permissions: ``aws-marketplace:Subscribe`` limited to the models' product ids
    (the ``aws-marketplace:ProductId`` condition AWS documents for model access) and
    ``aws-marketplace:ViewSubscriptions``, which has no resource or condition to scope by.
    Our code makes neither call; Bedrock does, once per account.
    """
    iam.Grant.add_to_principal(
        grantee=grantee,
        actions=["aws-marketplace:Subscribe"],
        resource_arns=["*"],
        conditions={"ForAnyValue:StringEquals": {"aws-marketplace:ProductId": list(product_ids)}},
    )
    iam.Grant.add_to_principal(
        grantee=grantee, actions=["aws-marketplace:ViewSubscriptions"], resource_arns=["*"]
    )


def _grant_table(table: dynamodb.Table, grantee: iam.IGrantable, *actions: str) -> None:
    # Exact actions on the table alone: grant_read_data and the like add Scan, BatchGetItem,
    # DescribeTable and stream reads, and Table.grant adds the indexes, none of which the
    # functions call.
    iam.Grant.add_to_principal(
        grantee=grantee,
        actions=[f"dynamodb:{action}" for action in actions],
        resource_arns=[table.table_arn],
    )


AUDIT_WRITES = ("dynamodb:UpdateItem", "dynamodb:DeleteItem", "dynamodb:BatchWriteItem")
"""What no role may do to an audit line: change it, delete it, or write it in a batch (a batch's
put replaces and its delete removes; ``append_audit`` is one conditional PutItem)."""
AUDIT_READS = ("dynamodb:GetItem", "dynamodb:Query", "dynamodb:BatchGetItem")


def _protect_audit(table: dynamodb.Table, grantee: iam.IGrantable, *, reads_it: bool) -> None:
    """Deny changing or deleting approvals' audit lines, and reading them unless ``reads_it``.

    Audit lines live in partitions of their own (``audit#approval#<id>``) because IAM only sees
    partition keys (``dynamodb:LeadingKeys``), never sort keys. ``ForAnyValue``: a batch
    touching one audit partition among others is denied too. PutItem stays allowed (that is
    the append); IAM has no condition on ``ConditionExpression``, so a role could in principle
    replace a line with a PutItem of the same key: ``append_audit`` never does (its
    ``attribute_not_exists`` condition), point-in-time recovery keeps every version, and the
    evidence chain (``langorch audit verify``) shows a line that changed after export.
    """
    audit = [f"{AUDIT_PARTITION_PREFIX}*"]
    where = {"ForAnyValue:StringLike": {"dynamodb:LeadingKeys": audit}}
    actions = [*AUDIT_WRITES, *([] if reads_it else AUDIT_READS)]
    principal = grantee.grant_principal
    principal.add_to_principal_policy(
        iam.PolicyStatement(
            effect=iam.Effect.DENY,
            actions=actions,
            resources=[table.table_arn],
            conditions=where,
        )
    )


def _grant_index_query(table: dynamodb.Table, grantee: iam.IGrantable) -> None:
    # Query on the table's global secondary indexes (an index has its own ARN).
    iam.Grant.add_to_principal(
        grantee=grantee,
        actions=["dynamodb:Query"],
        resource_arns=[f"{table.table_arn}/index/*"],
    )


def _grant_secret_read(secret: secretsmanager.ISecret, grantee: iam.IGrantable) -> None:
    # GetSecretValue only (Powertools' provider): grant_read adds DescribeSecret.
    iam.Grant.add_to_principal(
        grantee=grantee,
        actions=["secretsmanager:GetSecretValue"],
        resource_arns=[secret.secret_arn],
    )


@dataclass(frozen=True)
class _Spec:
    name: str
    handler: str
    memory: int
    timeout: Duration
    description: str
    layers: tuple[str, ...] = (BASE_LAYER,)
    """The dependency layers the handler imports from (tests/infra/test_layers.py)."""


_TRIGGER = _Spec(
    "trigger",
    "functions.trigger.handler.handler",
    512,
    Duration.seconds(29),  # API Gateway's integration limit: answer within it
    "Starts runs from webhooks, schedules and file drops (deduplicated)",
)
_RUNNER = _Spec(
    "run-segment",
    "functions.run_segment.handler.handler",
    1024,
    RUNNER_TIMEOUT,
    "Runs one segment of a run (LangGraph, DynamoDB checkpoints)",
    (BASE_LAYER, RUNNER_LAYER),
)
_REQUEST_APPROVAL = _Spec(
    "request-approval",
    "functions.request_approval.handler.handler",
    512,
    Duration.seconds(60),
    "Parks a run for a human: stores the task token, emails a signed link",
)
_APPROVAL_CALLBACK = _Spec(
    "approval-callback",
    "functions.approval_callback.handler.handler",
    512,
    Duration.seconds(29),
    "Approval page and decision: verifies the link, decides once, resumes the run",
)


class Functions(Construct):
    """The handlers in ``functions/``, their roles, log groups and permissions.

    Every function: Python 3.12 on arm64, the same code asset (``functions/`` +
    ``shared/langorch``), the base dependency layer (the runner also its own), JSON logs to a
    log group with retention, X-Ray tracing, and a role of its own holding only what its
    ``grant_*`` calls give it. The runner has SnapStart and is invoked through the ``live``
    alias (SnapStart applies to published versions only).

    Args:
        prefix: name prefix, ``langorch-<stage>``.
        build_dir: where the assets are staged.
        bundle: build the dependency layers (else placeholders; see ``bundling``).
        python312: interpreter for byte-compiling, when bundling.
        log_retention_days: retention of the function log groups.
        tables, files, secrets, email: the resources the handlers use.
        bedrock_models: model or inference-profile ids the runner may invoke.
        bedrock_regions: where inference profiles may route (default: the stack's region).
        bedrock_marketplace_products: AWS Marketplace product ids of the configured models,
            letting the runner's first invocation subscribe the account (see
            :func:`grant_bedrock_first_use`).
        snap_start: SnapStart on the runner (the alias is used either way).
        runner_extras: the optional dependency groups in the runner's layer (its LLM
            providers, ``otel``; ``DeployConfig.runner_extras``).
        runner_tools: the MCP SDK in the runner's layer (a deployment with ``mcp_servers``).
    """

    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        prefix: str,
        build_dir: Path,
        bundle: bool,
        python312: str | None,
        log_retention_days: int,
        tables: Tables,
        files: FilesBucket,
        secrets: Secrets,
        email: Email,
        bedrock_models: tuple[str, ...] = (),
        bedrock_regions: tuple[str, ...] = (),
        bedrock_marketplace_products: tuple[str, ...] = (),
        snap_start: bool = True,
        runner_extras: tuple[str, ...] = ("bedrock",),
        runner_tools: bool = False,
    ) -> None:
        super().__init__(scope, id)
        self._prefix = prefix
        self._retention = retention_days(log_retention_days)
        # Byte-compiled only when bundling: tests and synth need no Python 3.12.
        compiler = find_python312(python312) if bundle else None
        self.code = lambda_.Code.from_asset(str(stage_code(build_dir, python312=compiler)))
        requirements = (
            layer_requirements(extras=runner_extras, tools=runner_tools) if bundle else {}
        )
        self.layers = {
            layer: lambda_.LayerVersion(
                self,
                construct_id,
                code=layer_code(build_dir, layer, requirements.get(layer), python312=python312),
                compatible_runtimes=[RUNTIME],
                compatible_architectures=[ARCHITECTURE],
                # Named so the README's tear-down can list the versions RETAIN leaves behind.
                layer_version_name=f"{prefix}-{name}",
                description=f"langorch {description} (arm64, Python 3.12, byte-compiled)",
                removal_policy=RemovalPolicy.RETAIN,  # a published SnapStart version may use it
            )
            for layer, construct_id, name, description in (
                (BASE_LAYER, "Dependencies", "dependencies", "dependencies of every function"),
                (RUNNER_LAYER, "RunnerDependencies", "runner-dependencies", "runner's own"),
            )
        }
        self.log_groups: dict[str, logs.LogGroup] = {}

        self.trigger = self._function("Trigger", _TRIGGER)
        self.run_segment = self._function(
            "RunSegment",
            _RUNNER,
            snap_start=lambda_.SnapStartConf.ON_PUBLISHED_VERSIONS if snap_start else None,
        )
        self.request_approval = self._function("RequestApproval", _REQUEST_APPROVAL)
        self.approval_callback = self._function("ApprovalCallback", _APPROVAL_CALLBACK)
        # Step Functions invokes the alias: SnapStart snapshots published versions only, and
        # $LATEST would restore nothing. current_version changes with code and configuration.
        self.runner_alias = lambda_.Alias(
            self, "RunSegmentLive", alias_name="live", version=self.run_segment.current_version
        )

        # --- permissions: each function gets the calls its code makes, nothing more ---
        # tests/infra/test_iam_from_code.py derives every function's AWS calls from the
        # adapters its use-cases reach and checks these grants equal them, action for action.
        trigger, runner = self.trigger, self.run_segment
        request, callback = self.request_approval, self.approval_callback
        # trigger: the workflow and its trigger (GetItem; the trigger index Scans the heads),
        # the run and its dedupe marker (a transaction: Put + ConditionCheck; its first
        # timeline events: BatchWrite), webhook signatures. StartExecution comes with the
        # state machine.
        _grant_table(tables.definitions, trigger, "GetItem", "Scan")
        # The reconcile pass lists open runs by status (an index, then the page's records by
        # key: BatchGetItem) and ends stranded ones (UpdateItem; Query reads the timeline for
        # the first cause); DescribeExecution is granted with the state machine.
        _grant_table(
            tables.runs,
            trigger,
            "GetItem",
            "BatchGetItem",
            "PutItem",
            "UpdateItem",
            "ConditionCheckItem",
            "BatchWriteItem",
            "Query",
            # A resource queue's waiters are items of their own: a release deletes one.
            "DeleteItem",
        )
        _grant_index_query(tables.runs, trigger)
        secrets.grant_read_webhook_secrets(trigger)
        # ... and approvals' wake-ups (reminders, escalations: issue 13): the approval, its votes
        # and counters (the runs-table actions above), the link key and SES for the emails.
        _grant_secret_read(secrets.link_signing_key, trigger)
        email.grant_send(trigger)
        # A run the reconcile pass ends gives back its resource leases, which wakes the run
        # parked next in that resource's queue (its task token: not ARN-scoped, see below).
        iam.Grant.add_to_principal(
            grantee=trigger, actions=["states:SendTaskSuccess"], resource_arns=["*"]
        )
        # runner: pinned definitions, the run (lease, timeline — Query: MarkFailed reads it
        # for the first cause of a failing streak — approvals it cancels),
        # checkpoints (LangGraph's saver: Query, Scan for list(), BatchWrite) with S3 offload,
        # long-term memory (langgraph-checkpoint-aws's store), the LLM key, dropped files.
        _grant_table(tables.definitions, runner, "GetItem")
        _grant_table(
            tables.runs,
            runner,
            "GetItem",
            "PutItem",
            "UpdateItem",
            "ConditionCheckItem",
            "BatchWriteItem",
            "Query",
            "DeleteItem",  # a resource queue's waiter item, when it leaves the queue
        )
        # PutItem: a segment's fenced supersteps are TransactWriteItems Puts (its ConditionCheck
        # is on the runs table, granted above).
        _grant_table(tables.checkpoints, runner, "Query", "Scan", "BatchWriteItem", "PutItem")
        _grant_table(tables.memory, runner, "GetItem", "UpdateItem", "DeleteItem", "Query", "Scan")
        # A step that gives back a resource lease wakes the run parked next in its queue
        # (AwaitResource's task token); a task token names no state machine (see below).
        iam.Grant.add_to_principal(
            grantee=runner, actions=["states:SendTaskSuccess"], resource_arns=["*"]
        )
        files.grant_checkpoint_offload(runner)
        files.grant_artifacts_write(runner)
        # read_file steps read with a role of their own, which may read the bucket's files and
        # is explicitly denied the checkpoint prefix: a step can never read a run's
        # checkpoints, whatever key it renders (the executor refuses them too).
        assert runner.role is not None
        self.file_reader_role = iam.Role(
            self,
            "FileReaderRole",
            assumed_by=iam.ArnPrincipal(runner.role.role_arn),
            description="langorch read_file steps: read dropped files, never checkpoints",
        )
        files.grant_read_drops(self.file_reader_role)
        files.deny_checkpoints(self.file_reader_role)
        self.file_reader_role.grant_assume_role(runner.role)
        runner.add_environment("LANGORCH_FILE_READER_ROLE_ARN", self.file_reader_role.role_arn)
        _grant_secret_read(secrets.llm_api_key, runner)
        if bedrock_models:
            iam.Grant.add_to_principal(
                grantee=runner,
                # Converse is authorized as InvokeModel; nothing streams.
                actions=["bedrock:InvokeModel"],
                resource_arns=bedrock_model_arns(
                    Stack.of(self), bedrock_models, bedrock_regions or (Stack.of(self).region,)
                ),
            )
            if bedrock_marketplace_products:
                grant_bedrock_first_use(runner, bedrock_marketplace_products)
        # request_approval: the run, the approval record and its audit (runs table), the
        # signing key for the link, SES for the email.
        # Query: the audit trail says which chat messages were posted already (issue 30).
        _grant_table(tables.runs, request, "GetItem", "PutItem", "UpdateItem", "Query")
        _grant_secret_read(secrets.link_signing_key, request)
        # Slack's bot token: requests are posted to Slack, and a decision edits them.
        _grant_secret_read(secrets.slack, request)
        email.grant_send(request)
        # approval_callback: verify the link, decide once (conditional write), resume the run.
        # Votes are counted with a Query; a delegate is emailed a link of their own.
        _grant_table(tables.runs, callback, "GetItem", "PutItem", "UpdateItem", "Query")
        _grant_secret_read(secrets.link_signing_key, callback)
        # Slack: the signing secret verifies button presses, the bot token answers them.
        _grant_secret_read(secrets.slack, callback)
        # A press is acknowledged at once and decided by the function's own asynchronous
        # invocation (Bolt's lazy listener): it invokes itself, and Lambda retries that event
        # twice when deciding fails. In a policy of its own: the function depends on its
        # role's default policy, which naming the function's ARN would make a cycle.
        assert callback.role is not None
        iam.Policy(
            self,
            "CallbackInvokesItself",
            roles=[callback.role],
            statements=[
                iam.PolicyStatement(
                    actions=["lambda:InvokeFunction"], resources=[callback.function_arn]
                )
            ],
        )
        callback.configure_async_invoke(retry_attempts=2)
        email.grant_send(callback)
        # Task tokens are not ARN-scoped: SendTaskSuccess names no state machine in the
        # request, so IAM cannot match it to one, and the service authorization reference
        # lists no resource type for it. This is the stack's one wildcard resource outside
        # X-Ray (which has no resource-level permissions either). A rejection also resumes
        # the run with SendTaskSuccess (the run decides what "rejected" means), so
        # SendTaskFailure is never called and not granted.
        iam.Grant.add_to_principal(
            grantee=callback, actions=["states:SendTaskSuccess"], resource_arns=["*"]
        )
        # A decision recorded while the run had no task (its execution replaced by a redrive
        # or a restart) goes to the task that parks the run again: request_approval sends it.
        iam.Grant.add_to_principal(
            grantee=request, actions=["states:SendTaskSuccess"], resource_arns=["*"]
        )
        # Who holds SendTaskSuccess, and why each must (the IAM-from-code test derives the same
        # four from the code): approval_callback resumes a decided run; request_approval hands
        # a decision recorded while the run had no task to the task that parks it again; the
        # runner and the trigger wake the run queued next on a resource a run gives back. A
        # task token is an opaque string that names no state machine, and Step Functions
        # authorizes SendTaskSuccess on no resource type and no service condition key, so
        # "*" cannot be narrowed by ARN; what contains it is who can read tokens: they are kept
        # in the runs table's approval `secret` items and resource queues, never in a URL, an
        # email, a log line or the state machine's logged execution data.
        #
        # The approvals' audit lines: every role appends them (PutItem), none may change or
        # delete them, and only the three that show them (request_approval posts chat messages
        # from the trail, approval_callback updates them on a decision, the trigger's timers
        # post reminders and escalations into their threads) may read them.
        for function, reads_it in ((trigger, True), (runner, False), (request, True)):
            _protect_audit(tables.runs, function, reads_it=reads_it)
        _protect_audit(tables.runs, callback, reads_it=True)

    @property
    def all(self) -> dict[str, lambda_.Function]:
        """Every function by short name, for environment, alarms and dashboards."""
        return {
            "trigger": self.trigger,
            "run-segment": self.run_segment,
            "request-approval": self.request_approval,
            "approval-callback": self.approval_callback,
        }

    def function_name(self, short: str) -> str:
        """The physical name of a function (its log group is ``/aws/lambda/<name>``)."""
        return f"{self._prefix}-{short}"

    @property
    def log_group_prefix(self) -> str:
        """What ``langorch runs logs`` searches (``Settings.log_group_prefix``)."""
        return f"/aws/lambda/{self._prefix}-"

    def add_environment(self, env: dict[str, str]) -> None:
        """Add ``LANGORCH_*`` settings to every function."""
        for function in self.all.values():
            for key, value in env.items():
                function.add_environment(key, value)

    def _function(
        self, id: str, spec: _Spec, *, snap_start: lambda_.SnapStartConf | None = None
    ) -> lambda_.Function:
        name = self.function_name(spec.name)
        # The log group is created here (not by Lambda on first write) so it has retention
        # and is deleted with the stack; the name is Lambda's default so the CLI finds it.
        log_group = logs.LogGroup(
            self,
            f"{id}Logs",
            log_group_name=f"/aws/lambda/{name}",
            retention=self._retention,
            removal_policy=RemovalPolicy.DESTROY,
        )
        self.log_groups[spec.name] = log_group
        # An explicit role: CDK's default attaches the AWSLambdaBasicExecutionRole managed
        # policy (logs:* on every log group); this one may write to its own group only.
        role = iam.Role(
            self,
            f"{id}Role",
            assumed_by=iam.ServicePrincipal("lambda.amazonaws.com"),
            description=f"langorch {spec.name} function",
        )
        log_group.grant_write(role)
        return lambda_.Function(
            self,
            id,
            function_name=name,
            description=spec.description,
            runtime=RUNTIME,
            architecture=ARCHITECTURE,
            handler=spec.handler,
            code=self.code,
            layers=[self.layers[layer] for layer in spec.layers],
            memory_size=spec.memory,
            timeout=spec.timeout,
            role=role,
            log_group=log_group,
            logging_format=lambda_.LoggingFormat.JSON,
            application_log_level_v2=lambda_.ApplicationLogLevel.INFO,
            # INFO, not WARN: Lambda's REPORT line (platform.report: duration, init and
            # SnapStart restore durations) is an INFO system event; the dashboard reads it.
            system_log_level_v2=lambda_.SystemLogLevel.INFO,
            tracing=lambda_.Tracing.ACTIVE,
            snap_start=snap_start,
            # A replaced version is deleted: SnapStart bills each published version's cached
            # snapshot for as long as it exists, and only the live alias is ever invoked.
            current_version_options=lambda_.VersionOptions(removal_policy=RemovalPolicy.DESTROY),
            environment={
                "POWERTOOLS_SERVICE_NAME": "langorch",
                "POWERTOOLS_METRICS_NAMESPACE": "langorch",
                "LANGORCH_REGION": Stack.of(self).region,
            },
        )
