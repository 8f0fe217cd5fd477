"""Dashboard, alarms and Logs Insights queries: inspect runs in CloudWatch."""

from __future__ import annotations

from aws_cdk import Duration, Stack
from aws_cdk import aws_cloudwatch as cw
from aws_cdk import aws_cloudwatch_actions as cw_actions
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from aws_cdk import aws_sns as sns
from aws_cdk import aws_sns_subscriptions as subscriptions
from aws_cdk import aws_sqs as sqs
from aws_cdk import aws_stepfunctions as sfn
from constructs import Construct

NAMESPACE = "langorch"
"""EMF namespace of ``langorch.observability``; Powertools adds the ``service`` dimension."""
DIMENSIONS = {"service": "langorch"}
PERIOD = Duration.minutes(5)
RETRIED_BY_THE_STATE_MACHINE = ("run-segment", "request-approval")
"""Functions whose storage and lease errors the state machine retries on purpose: their alarm
watches ``UnexpectedErrors`` (emitted by the handler), not Lambda's ``Errors``."""


def metric(
    name: str,
    statistic: str = "Sum",
    label: str | None = None,
    dimensions: dict[str, str] | None = None,
) -> cw.Metric:
    """One of the handlers' EMF metrics, with the dimensions it is emitted with."""
    return cw.Metric(
        namespace=NAMESPACE,
        metric_name=name,
        dimensions_map={**DIMENSIONS, **(dimensions or {})},
        statistic=statistic,
        period=PERIOD,
        label=label or name,
    )


def search(name: str, dimension: str, label: str, statistic: str = "Sum") -> cw.MathExpression:
    """Every series of a metric emitted per value of one more dimension (``trigger`` of
    ``RunsStarted``, ``status`` of ``WebhookRejected``): one line per value seen."""
    return cw.MathExpression(
        expression=(
            f"SEARCH('{{{NAMESPACE},service,{dimension}}} MetricName=\"{name}\"', "
            f"'{statistic}', "
            f"{int(PERIOD.to_seconds())})"
        ),
        label=label,
        period=PERIOD,
    )


COLD_STARTS_QUERY = [
    # Lambda's own REPORT line (JSON logs: platform.report) carries the init duration of a
    # cold start and, for SnapStart, the restore duration; CloudWatch has no metric for them.
    "fields @timestamp, @log",
    'filter type = "platform.report"',
    "stats count(record.metrics.initDurationMs) as cold_starts,"
    " avg(record.metrics.initDurationMs) as init_avg_ms,"
    " pct(record.metrics.initDurationMs, 95) as init_p95_ms,"
    " count(record.metrics.restoreDurationMs) as restores,"
    " avg(record.metrics.restoreDurationMs) as restore_avg_ms,"
    " pct(record.metrics.restoreDurationMs, 95) as restore_p95_ms by @log",
]


class Observability(Construct):
    """A dashboard, alarms on an SNS topic, and saved Logs Insights queries.

    Args:
        prefix: name prefix, ``langorch-<stage>``.
        functions: the functions by short name.
        log_groups: the functions' log groups (queries search them).
        state_machine: the run state machine.
        dead_letter_queues: every DLQ by name.
        alarm_email: optional subscriber of the alarm topic.
        tables: tables whose throttled reads and writes alarm, by short name.
        bedrock_models: model or profile ids whose Bedrock throttles alarm.
        ses_configuration_set: the approval emails' configuration set, whose bounce and
            complaint rates alarm (``None``: no email).
    """

    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        prefix: str,
        functions: dict[str, lambda_.Function],
        log_groups: list[logs.ILogGroup],
        state_machine: sfn.StateMachine,
        dead_letter_queues: dict[str, sqs.Queue],
        alarm_email: str | None,
        tables: dict[str, dynamodb.ITable] | None = None,
        bedrock_models: tuple[str, ...] = (),
        ses_configuration_set: str | None = None,
    ) -> None:
        super().__init__(scope, id)
        self.topic = sns.Topic(self, "Alarms", display_name=f"{prefix} alarms", enforce_ssl=True)
        if alarm_email:
            self.topic.add_subscription(subscriptions.EmailSubscription(alarm_email))
        action = cw_actions.SnsAction(self.topic)

        self.alarms: list[cw.Alarm] = []
        tables = tables or {}

        def alarm(id: str, metric: cw.IMetric, description: str, threshold: float = 1) -> None:
            created = cw.Alarm(
                self,
                id,
                alarm_name=f"{prefix}-{id}",
                alarm_description=description,
                metric=metric,
                threshold=threshold,
                evaluation_periods=1,
                comparison_operator=cw.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
                treat_missing_data=cw.TreatMissingData.NOT_BREACHING,
            )
            created.add_alarm_action(action)
            self.alarms.append(created)

        alarm(
            "RunsFailed",
            state_machine.metric_failed(period=PERIOD, statistic="Sum"),
            "A run failed: `langorch runs list --status failed`, then `langorch runs show RUN_ID`.",
        )
        for name, queue in dead_letter_queues.items():
            alarm(
                f"Dlq-{name}",
                queue.metric_approximate_number_of_messages_visible(
                    period=PERIOD, statistic="Maximum"
                ),
                f"Events that could not start runs are waiting in the {name} DLQ.",
            )
        for name, function in functions.items():
            if name in RETRIED_BY_THE_STATE_MACHINE:
                alarm(
                    f"UnexpectedErrors-{name}",
                    metric("UnexpectedErrors", dimensions={"function": name}),
                    f"The {name} function failed with an error the state machine does not "
                    "retry; its log group has the error with the run id.",
                )
            else:
                alarm(
                    f"Errors-{name}",
                    function.metric_errors(period=PERIOD, statistic="Sum"),
                    f"The {name} function failed; its log group has the error with the run id.",
                )
            alarm(
                f"Throttles-{name}",
                function.metric_throttles(period=PERIOD, statistic="Sum"),
                f"The {name} function was throttled: raise the account's concurrency limit.",
            )
        for name, queue in dead_letter_queues.items():
            # Dead letters are kept DLQ_RETENTION (14 days): alarm at half of it, while there
            # is still time to redrive them.
            alarm(
                f"DlqAge-{name}",
                queue.metric_approximate_age_of_oldest_message(period=PERIOD, statistic="Maximum"),
                f"The oldest message in the {name} DLQ is 7 days old; it is deleted at 14.",
                threshold=7 * 24 * 3600,
            )
        for name, table in tables.items():
            throttled = cw.MathExpression(
                expression="reads + writes",
                using_metrics={
                    kind: cw.Metric(
                        namespace="AWS/DynamoDB",
                        metric_name=f"{kind.title()[:-1]}ThrottleEvents",
                        dimensions_map={"TableName": table.table_name},
                        period=PERIOD,
                        statistic="Sum",
                    )
                    for kind in ("reads", "writes")
                },
                period=PERIOD,
            )
            alarm(
                f"TableThrottled-{name}",
                throttled,
                f"DynamoDB throttled requests on the {name} table (on-demand: a sudden peak "
                "above twice the previous one, or a hot partition).",
            )
        for model in bedrock_models:
            # Model ids hold ':' and '.', which alarm names take; only the last part names it.
            short = model.split(".", 1)[-1].split(":")[0][:60]
            alarm(
                f"BedrockThrottled-{short}",
                cw.Metric(
                    namespace="AWS/Bedrock",
                    metric_name="InvocationThrottles",
                    dimensions_map={"ModelId": model},
                    period=PERIOD,
                    statistic="Sum",
                ),
                f"Bedrock throttled {model}: raise its quota (Service Quotas, Amazon Bedrock) "
                "or spread the load over a cross-region profile.",
            )
        if ses_configuration_set:
            # Reputation metrics of the configuration set: SES reviews an account at a 5%
            # bounce rate and pauses it at 10%; complaints at 0.1% and 0.5%.
            for metric_name, threshold in (("BounceRate", 0.05), ("ComplaintRate", 0.001)):
                alarm(
                    f"Ses{metric_name}",
                    cw.Metric(
                        namespace="AWS/SES",
                        metric_name=f"Reputation.{metric_name}",
                        dimensions_map={"ses:configuration-set": ses_configuration_set},
                        period=Duration.hours(1),
                        statistic="Maximum",
                    ),
                    f"Approval emails' {metric_name} reached {threshold:.1%}, where SES reviews "
                    "the account (it pauses sending at twice that): check the approvers' "
                    "addresses (`langorch approvals show`).",
                    threshold=threshold,
                )
        alarm(
            "ExecutionsThrottled",
            state_machine.metric_throttled(period=PERIOD, statistic="Sum"),
            "Step Functions throttled run state transitions.",
        )

        self.run_lines = logs.QueryDefinition(
            self,
            "RunLines",
            query_definition_name=f"{prefix}/run-lines",
            # Saved queries take no parameters: replace RUN_ID before running it.
            query_string=logs.QueryString(
                fields=["@timestamp", "level", "step_id", "segment", "message"],
                filter_statements=['run_id = "RUN_ID"'],
                sort="@timestamp asc",
                limit=10000,
            ),
            log_groups=log_groups,
        )
        self.errors = logs.QueryDefinition(
            self,
            "Errors",
            query_definition_name=f"{prefix}/errors",
            query_string=logs.QueryString(
                fields=["@timestamp", "run_id", "workflow_id", "step_id", "message"],
                filter_statements=['level = "ERROR"'],
                sort="@timestamp desc",
                limit=1000,
            ),
            log_groups=log_groups,
        )

        # Dashboard names are global per account (not per region): the region makes one
        # stage deployable in two regions.
        self.dashboard = cw.Dashboard(
            self, "Dashboard", dashboard_name=f"{prefix}-{Stack.of(self).region}"
        )
        self.dashboard.add_widgets(
            cw.GraphWidget(
                title="Runs",
                left=[
                    search("RunsStarted", "trigger", "started"),
                    metric("RunsSucceeded", label="succeeded"),
                    metric("RunsFailed", label="failed"),
                    metric("RunsReconciled", label="stranded, ended by reconcile"),
                ],
                width=12,
            ),
            cw.GraphWidget(
                title="Segment duration (ms)",
                left=[
                    metric("SegmentDuration", "Average", "average"),
                    metric("SegmentDuration", "p95", "p95"),
                ],
                right=[metric("StepsRun", label="steps run")],
                width=12,
            ),
        )
        self.dashboard.add_widgets(
            cw.GraphWidget(
                title="Approvals",
                left=[
                    metric("ApprovalsRequested", label="requested"),
                    metric("ApprovalEmails", label="emails sent"),
                ],
                right=[
                    metric("ApprovalWait", "Average", "wait average (s)"),
                    metric("ApprovalWait", "p95", "wait p95 (s)"),
                ],
                width=8,
            ),
            cw.GraphWidget(
                title="Approval pages",
                left=[metric(f"ApprovalPages{klass}xx", label=f"{klass}xx") for klass in (2, 4, 5)],
                width=8,
            ),
            cw.GraphWidget(
                title="LLM tokens and webhooks rejected",
                left=[metric("LLMTokens", label="tokens")],
                right=[search("WebhookRejected", "status", "rejected")],
                width=8,
            ),
        )
        self.dashboard.add_widgets(
            cw.GraphWidget(
                title="Run cost by workflow (USD)",
                left=[search("RunCost", "workflow", "cost")],
                width=12,
            ),
            # The figures of `langorch approvals stats`, per policy (workflow/step); per
            # approver is the CLI's and the console's (approvers are not a bounded dimension).
            cw.GraphWidget(
                title="Approval quality by policy (rates 0-1; time to decide, s)",
                left=[
                    search("ApprovalRubberStamp", "policy", "rubber-stamp rate", "Average"),
                    search("ApprovalApproved", "policy", "approve rate", "Average"),
                ],
                right=[search("ApprovalDecideSeconds", "policy", "time to decide", "p50")],
                width=12,
            ),
        )
        self.dashboard.add_widgets(
            cw.GraphWidget(
                title="Function errors",
                left=[f.metric_errors(period=PERIOD, label=n) for n, f in functions.items()],
                width=8,
            ),
            cw.GraphWidget(
                title="Function duration p95 (ms)",
                left=[
                    f.metric_duration(period=PERIOD, statistic="p95", label=n)
                    for n, f in functions.items()
                ],
                width=8,
            ),
            cw.GraphWidget(
                title="Throttles and dead letters",
                left=[f.metric_throttles(period=PERIOD, label=n) for n, f in functions.items()],
                right=[
                    q.metric_approximate_number_of_messages_visible(period=PERIOD, label=n)
                    for n, q in dead_letter_queues.items()
                ],
                width=8,
            ),
        )
        self.dashboard.add_widgets(
            cw.GraphWidget(
                title="Unexpected errors (not retried)",
                left=[
                    metric("UnexpectedErrors", label=n, dimensions={"function": n})
                    for n in RETRIED_BY_THE_STATE_MACHINE
                ],
                width=8,
            ),
            cw.LogQueryWidget(
                title="Cold starts: init and SnapStart restore (ms)",
                log_group_names=[g.log_group_name for g in log_groups],
                query_lines=COLD_STARTS_QUERY,
                width=16,
            ),
        )
        self.dashboard.add_widgets(
            cw.AlarmStatusWidget(title="Alarms", alarms=self.alarms, width=24),
        )
        self.dashboard.add_widgets(
            cw.LogQueryWidget(
                title="Recent errors",
                log_group_names=[g.log_group_name for g in log_groups],
                query_lines=[
                    "fields @timestamp, run_id, workflow_id, step_id, message",
                    'filter level = "ERROR"',
                    "sort @timestamp desc",
                    "limit 50",
                ],
                width=24,
            )
        )
