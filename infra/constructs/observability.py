"""Dashboard, alarms and Logs Insights queries: inspect runs in CloudWatch."""

from __future__ import annotations

from aws_cdk import Duration
from aws_cdk import aws_cloudwatch as cw
from aws_cdk import aws_cloudwatch_actions as cw_actions
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


def metric(name: str, statistic: str = "Sum", label: str | None = None) -> cw.Metric:
    """One of the handlers' EMF metrics."""
    return cw.Metric(
        namespace=NAMESPACE,
        metric_name=name,
        dimensions_map=DIMENSIONS,
        statistic=statistic,
        period=PERIOD,
        label=label or name,
    )


class Observability(Construct):
    """A dashboard, alarms on an SNS topic, and saved Logs Insights queries.

    Args:
        prefix: name prefix, ``langorch-<stage>``.
        functions: the functions by short name.
        log_groups: the functions' log groups (queries search them).
        state_machine: the run state machine.
        dead_letter_queues: every DLQ by name.
        alarm_email: optional subscriber of the alarm topic.
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
    ) -> None:
        super().__init__(scope, id)
        self.topic = sns.Topic(self, "Alarms", display_name=f"{prefix} alarms", enforce_ssl=True)
        if alarm_email:
            self.topic.add_subscription(subscriptions.EmailSubscription(alarm_email))
        action = cw_actions.SnsAction(self.topic)

        self.alarms: list[cw.Alarm] = []

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

        self.dashboard = cw.Dashboard(self, "Dashboard", dashboard_name=prefix)
        self.dashboard.add_widgets(
            cw.GraphWidget(
                title="Runs",
                left=[
                    metric("RunsStarted", label="started"),
                    metric("RunsSucceeded", label="succeeded"),
                    metric("RunsFailed", label="failed"),
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
                title="Approval wait (s)",
                left=[
                    metric("ApprovalWait", "Average", "average"),
                    metric("ApprovalWait", "p95", "p95"),
                ],
                width=8,
            ),
            cw.GraphWidget(title="LLM tokens", left=[metric("LLMTokens", label="tokens")], width=8),
            cw.GraphWidget(
                title="Webhooks rejected",
                left=[metric("WebhookRejected", label="rejected")],
                width=8,
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
