"""Dashboard, alarms and Logs Insights queries."""

from __future__ import annotations

import json

from tests.infra.conftest import STAGE, Synth


def _dashboard_body(synth: Synth) -> str:
    (dashboard,) = synth.of_type("AWS::CloudWatch::Dashboard").values()
    body = dashboard["Properties"]["DashboardBody"]
    if isinstance(body, str):
        return body
    return "".join(p if isinstance(p, str) else json.dumps(p) for p in body["Fn::Join"][1])


def test_dashboard_shows_lambdas_own_metrics_too(synth: Synth) -> None:
    # The handlers' metrics are checked against what the code emits in
    # test_metrics_contract.py; Lambda's own are shown beside them.
    body = _dashboard_body(synth)
    assert '"AWS/Lambda","Errors"' in body
    assert '"AWS/Lambda","Duration"' in body


def test_alarms_cover_failed_runs_dlqs_throttles_reputation_and_handler_errors(
    synth: Synth,
) -> None:
    alarms = {
        a["Properties"]["AlarmName"]: a["Properties"]
        for a in synth.of_type("AWS::CloudWatch::Alarm").values()
    }
    prefix = f"langorch-{STAGE}-"
    expected = {"RunsFailed", "ExecutionsThrottled"}
    queues = ("schedules", "file-events", "trigger", "events")
    expected |= {f"Dlq-{q}" for q in queues}
    # ...dead letters about to expire, throttling by DynamoDB and Bedrock, SES reputation
    expected |= {f"DlqAge-{q}" for q in queues}
    expected |= {f"TableThrottled-{t}" for t in ("definitions", "runs", "checkpoints", "memory")}
    expected |= {"BedrockThrottled-claude-3-haiku-20240307-v1", "SesBounceRate", "SesComplaintRate"}
    for fn in ("trigger", "run-segment", "request-approval", "approval-callback"):
        expected.add(f"Throttles-{fn}")
    # Lambda's Errors for the API's functions; for the two the state machine retries on
    # storage and lease errors, only the errors no retry absorbs.
    expected |= {"Errors-trigger", "Errors-approval-callback"}
    expected |= {"UnexpectedErrors-run-segment", "UnexpectedErrors-request-approval"}
    assert set(alarms) == {prefix + name for name in expected}
    topic = synth.logical_id(synth.stack.observability.topic)
    for alarm in alarms.values():
        assert alarm["AlarmActions"] == [{"Ref": topic}]
        assert alarm["TreatMissingData"] == "notBreaching"
    assert alarms[prefix + "RunsFailed"]["MetricName"] == "ExecutionsFailed"


def test_alarm_email_is_subscribed(synth: Synth) -> None:
    topic_id = synth.logical_id(synth.stack.observability.topic)
    topic = synth.resources[topic_id]
    subscriptions = topic["Properties"].get("Subscription") or [
        s["Properties"]
        for s in synth.of_type("AWS::SNS::Subscription").values()
        if s["Properties"]["TopicArn"] == {"Ref": topic_id}
    ]
    assert any(s.get("Endpoint") == "ops@example.org" for s in subscriptions)


def test_saved_query_finds_a_runs_lines_in_every_function_log_group(synth: Synth) -> None:
    queries = {
        q["Properties"]["Name"]: q["Properties"]
        for q in synth.of_type("AWS::Logs::QueryDefinition").values()
    }
    run_lines = queries[f"langorch-{STAGE}/run-lines"]
    assert 'filter run_id = "RUN_ID"' in run_lines["QueryString"]
    groups = {g["Ref"] for g in run_lines["LogGroupNames"]}
    assert groups == {synth.logical_id(g) for g in synth.stack.functions.log_groups.values()}
