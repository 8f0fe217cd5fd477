"""Least privilege: what each function may do, and where a wildcard is allowed and why."""

from __future__ import annotations

from typing import Any

import pytest

from tests.infra.conftest import STAGE, Synth
from tests.infra.helpers import actions_on, as_list, function_role, render, role_statements

READ = {
    "dynamodb:BatchGetItem",
    "dynamodb:GetItem",
    "dynamodb:Query",
    "dynamodb:Scan",
    "dynamodb:ConditionCheckItem",
    "dynamodb:DescribeTable",
    "dynamodb:GetRecords",
    "dynamodb:GetShardIterator",
}
WRITE = {
    "dynamodb:PutItem",
    "dynamodb:UpdateItem",
    "dynamodb:DeleteItem",
    "dynamodb:BatchWriteItem",
}

ANY_RESOURCE_ALLOWED = {
    # X-Ray has no resource-level permissions (active tracing adds these).
    "xray:PutTraceSegments",
    "xray:PutTelemetryRecords",
    "xray:GetSamplingRules",
    "xray:GetSamplingTargets",
    # A task token names no state machine: these cannot be scoped (documented in functions.py).
    "states:SendTaskSuccess",
    # Step Functions' log delivery to CloudWatch Logs (vended logs) has no resource-level
    # permissions; CDK adds these to the state machine role when logging is on.
    "logs:CreateLogDelivery",
    "logs:GetLogDelivery",
    "logs:UpdateLogDelivery",
    "logs:DeleteLogDelivery",
    "logs:ListLogDeliveries",
    "logs:PutResourcePolicy",
    "logs:DescribeResourcePolicies",
    "logs:DescribeLogGroups",
}


def _allowed(synth: Synth, name: str) -> dict[str, set[str]]:
    fn = synth.stack.functions.all[name]
    return actions_on(
        role_statements(synth.resources, function_role(synth.resources, synth.logical_id(fn)))
    )


def _table(synth: Synth, name: str) -> str:
    return f"<{synth.logical_id(getattr(synth.stack.tables, name))}.Arn>"


def _tables_with(allowed: dict[str, set[str]], action: str) -> set[str]:
    return {r for r in allowed.get(action, set()) if "Tables" in r and "/index/" not in r}


@pytest.mark.parametrize(
    ("name", "reads", "writes"),
    [
        ("trigger", {"definitions", "runs"}, {"runs"}),
        (
            "run-segment",
            {"definitions", "runs", "checkpoints", "memory"},
            {"runs", "checkpoints", "memory"},
        ),
        ("request-approval", {"runs"}, {"runs"}),
        ("approval-callback", {"runs"}, {"runs"}),
    ],
)
def test_each_function_reads_and_writes_only_its_tables(
    synth: Synth, name: str, reads: set[str], writes: set[str]
) -> None:
    allowed = _allowed(synth, name)
    read = set().union(*(_tables_with(allowed, a) for a in READ))
    written = set().union(*(_tables_with(allowed, a) for a in WRITE))
    assert read == {_table(synth, t) for t in reads}
    assert written == {_table(synth, t) for t in writes}
    # No function reads a table's stream or asks for its description, and only the trigger
    # reaches an index: its reconcile pass Queries the runs table's status index.
    for action in ("dynamodb:DescribeTable", "dynamodb:GetRecords", "dynamodb:GetShardIterator"):
        assert action not in allowed
    indexes = {
        (action, r) for action, resources in allowed.items() for r in resources if "/index/" in r
    }
    runs_indexes = {("dynamodb:Query", f"{_table(synth, 'runs')}/index/*")}
    assert indexes == (runs_indexes if name == "trigger" else set())


def test_only_the_trigger_and_the_runner_start_executions_of_the_state_machine(
    synth: Synth,
) -> None:
    # The trigger starts runs; the runner starts the next run waiting for the concurrency key
    # of a run that ended (granted by the state machine's name: a reference would be a cycle)
    machine = f"<{synth.logical_id(synth.stack.workflow.state_machine)}>"
    assert _allowed(synth, "trigger")["states:StartExecution"] == {machine}
    (by_name,) = _allowed(synth, "run-segment")["states:StartExecution"]
    assert by_name.endswith(":stateMachine:langorch-test-runs"), by_name
    for name in ("request-approval", "approval-callback"):
        assert "states:StartExecution" not in _allowed(synth, name)


def test_only_the_approval_functions_the_runner_and_the_trigger_send_task_results(
    synth: Synth,
) -> None:
    # The callback resumes approvals; request_approval hands a decision recorded while the
    # run had no task to the task that parks it again; the runner, and the trigger's reconcile
    # pass when it ends a run, wake runs queued for a resource given back.
    for name in ("approval-callback", "request-approval", "run-segment", "trigger"):
        allowed = _allowed(synth, name)
        assert allowed["states:SendTaskSuccess"] == {"*"}
        assert "states:SendTaskFailure" not in allowed  # never called: every wake resumes


@pytest.mark.parametrize(
    "name",
    # request_approval emails the approvers; the trigger (approvals' reminders and
    # escalations, issue 13) and the callback (a delegate's link) email them too.
    ["request-approval", "trigger", "approval-callback"],
)
def test_only_the_approval_emailers_send_email_from_the_identity_and_configuration_set(
    synth: Synth, name: str
) -> None:
    allowed = _allowed(synth, name)
    (identity,) = synth.of_type("AWS::SES::EmailIdentity")
    (config_set,) = synth.of_type("AWS::SES::ConfigurationSet")
    # The sender's identity and the configuration set, and (in the SES sandbox) the
    # recipients' identities: every identity of the account and region, but only as the
    # configured sender (see test_ses_recipient_identities_only_for_the_configured_sender).
    assert allowed["ses:SendEmail"] == {
        f"arn:aws:ses:eu-west-1:123456789012:identity/<{identity}>",
        f"arn:aws:ses:eu-west-1:123456789012:configuration-set/<{config_set}>",
        "arn:aws:ses:eu-west-1:123456789012:identity/*",
    }
    assert "ses:SendRawEmail" not in allowed  # SesSender calls SendEmail only
    assert not any(a.startswith("ses:") for a in _allowed(synth, "run-segment"))


def test_secrets_are_readable_only_by_the_functions_that_use_them(synth: Synth) -> None:
    secrets = synth.stack.secrets
    link = f"<{synth.logical_id(secrets.link_signing_key)}>"
    llm = f"<{synth.logical_id(secrets.llm_api_key)}>"
    slack = f"<{synth.logical_id(secrets.slack)}>"
    readers = {
        name: _allowed(synth, name).get("secretsmanager:GetSecretValue", set())
        for name in synth.stack.functions.all
    }
    # Slack's secret: requests are posted and edited, presses verified and answered
    assert readers["request-approval"] == {link, slack}
    assert readers["approval-callback"] == {link, slack}
    # The runner: the LLM key and exactly the MCP secrets named in mcp_secrets (the -?????? is
    # the random suffix Secrets Manager appends to a secret's ARN)
    assert readers["run-segment"] == {
        llm,
        "arn:aws:secretsmanager:eu-west-1:123456789012:secret:langorch-test/tools/orders-??????",
    }
    assert readers["trigger"] == {
        f"arn:aws:secretsmanager:eu-west-1:123456789012:secret:langorch-{STAGE}/webhooks/*",
        link,  # approvals' reminders and escalations carry signed links
    }


def test_runner_writes_only_offloaded_checkpoints_and_artifacts_and_reads_the_bucket(
    synth: Synth,
) -> None:
    # Given the synthesized stack, When the runner's S3 permissions are read
    allowed = _allowed(synth, "run-segment")
    bucket = f"<{synth.logical_id(synth.stack.files.bucket)}.Arn>"
    s3_actions = {a for a in allowed if a.startswith("s3:")}
    # Then it reads, writes and deletes only under the checkpoint prefix and lists only that
    # prefix, and puts (only puts) the files runs attach under the artifacts prefix; no other
    # function touches S3
    assert s3_actions == {"s3:GetObject", "s3:PutObject", "s3:DeleteObject", "s3:ListBucket"}
    for action in ("s3:GetObject", "s3:DeleteObject"):
        assert allowed[action] == {f"{bucket}/checkpoints/*"}
    assert allowed["s3:PutObject"] == {f"{bucket}/checkpoints/*", f"{bucket}/artifacts/*"}
    assert allowed["s3:ListBucket"] == {bucket}
    for name in ("trigger", "request-approval", "approval-callback"):
        assert not any(a.startswith("s3:") for a in _allowed(synth, name))


def test_read_file_steps_read_files_with_a_role_explicitly_denied_every_checkpoint(
    synth: Synth,
) -> None:
    # Given the file reader role (before: read_file read with the runner's own s3:GetObject on
    # the whole bucket, checkpoints included; only application code kept them out)
    functions = synth.stack.functions
    reader = synth.logical_id(functions.file_reader_role)
    bucket = f"<{synth.logical_id(synth.stack.files.bucket)}.Arn>"
    statements = role_statements(synth.resources, reader)
    # Then it may read the bucket's objects and nothing else, and an explicit Deny (which no
    # allow overrides) covers every key under the checkpoint prefix
    allows = [s for s in statements if s["Effect"] == "Allow"]
    denies = [s for s in statements if s["Effect"] == "Deny"]
    assert [(s["Action"], [render(r) for r in as_list(s["Resource"])]) for s in allows] == [
        ("s3:GetObject", [f"{bucket}/*"])
    ]
    assert [(s["Action"], [render(r) for r in as_list(s["Resource"])]) for s in denies] == [
        ("s3:GetObject", [f"{bucket}/checkpoints/*"])
    ]
    # And only the runner's role may assume it, and the runner may assume only it
    trust = synth.resources[reader]["Properties"]["AssumeRolePolicyDocument"]["Statement"]
    runner_role = function_role(synth.resources, synth.logical_id(functions.run_segment))
    assert [render(s["Principal"]["AWS"]) for s in trust] == [f"<{runner_role}.Arn>"]
    assert _allowed(synth, "run-segment")["sts:AssumeRole"] == {f"<{reader}.Arn>"}
    for name in ("trigger", "request-approval", "approval-callback"):
        assert "sts:AssumeRole" not in _allowed(synth, name)


def test_ses_recipient_identities_only_for_the_configured_sender(synth: Synth) -> None:
    # Given request_approval's role
    fn = synth.stack.functions.request_approval
    statements = role_statements(
        synth.resources, function_role(synth.resources, synth.logical_id(fn))
    )
    # When the statement on every identity of the account is read
    (wide,) = [
        s for s in statements if "identity/*" in "".join(render(r) for r in as_list(s["Resource"]))
    ]
    # Then it holds only as long as the From address is the configured sender
    assert wide["Condition"] == {"StringEquals": {"ses:FromAddress": "approvals@example.org"}}


def test_runner_invokes_only_the_configured_bedrock_model(synth: Synth) -> None:
    allowed = _allowed(synth, "run-segment")
    assert allowed["bedrock:InvokeModel"] == {
        "arn:aws:bedrock:eu-west-1::foundation-model/anthropic.claude-3-haiku-20240307-v1:0"
    }


def test_a_global_inference_profile_is_granted_with_its_region_less_model_arn() -> None:
    from aws_cdk import App, Environment, Stack

    from infra.constructs.functions import bedrock_model_arns

    stack = Stack(App(), "s", env=Environment(account="123456789012", region="eu-west-1"))
    model = "global.anthropic.claude-haiku-4-5-20251001-v1:0"

    arns = [
        arn.replace(stack.partition, "aws")  # the partition is a deploy-time token
        for arn in bedrock_model_arns(stack, (model,), ("eu-west-1",))
    ]

    base = "anthropic.claude-haiku-4-5-20251001-v1:0"
    assert arns == [
        f"arn:aws:bedrock:eu-west-1:123456789012:inference-profile/{model}",
        f"arn:aws:bedrock:eu-west-1::foundation-model/{base}",
        f"arn:aws:bedrock:::foundation-model/{base}",
    ]


def _all_role_statements(synth: Synth) -> list[tuple[str, dict[str, Any]]]:
    found = []
    for role_id in synth.of_type("AWS::IAM::Role"):
        found.extend((role_id, s) for s in role_statements(synth.resources, role_id))
    return found


def test_no_iam_action_is_a_wildcard(synth: Synth) -> None:
    for role_id, statement in _all_role_statements(synth):
        for action in as_list(statement["Action"]):
            assert "*" not in action, (role_id, action)


def test_resource_star_only_for_actions_that_cannot_be_scoped(synth: Synth) -> None:
    for role_id, statement in _all_role_statements(synth):
        if "*" in as_list(statement["Resource"]):
            assert set(as_list(statement["Action"])) <= ANY_RESOURCE_ALLOWED, role_id


def test_every_other_wildcard_resource_is_a_scoped_pattern_under_one_of_our_resources(
    synth: Synth,
) -> None:
    # A * may only complete a pattern under a specific resource of this stack: the runs
    # table's indexes, the state machine's executions, the checkpoint and artifacts prefixes,
    # the files bucket's objects (read, by the runner), one function's versions, this stage's
    # webhook secrets (plus the random suffix of secret ARNs).
    stack = synth.stack
    allowed_patterns = {
        f"<{synth.logical_id(stack.tables.runs)}.Arn>/index/*",
        f"<{synth.logical_id(stack.files.bucket)}.Arn>/checkpoints/*",
        f"<{synth.logical_id(stack.files.bucket)}.Arn>/artifacts/*",
        f"<{synth.logical_id(stack.files.bucket)}.Arn>/*",
        f"<{synth.logical_id(stack.functions.trigger)}.Arn>:*",
        f"<{synth.logical_id(stack.functions.request_approval)}.Arn>:*",
        f"arn:aws:secretsmanager:eu-west-1:123456789012:secret:langorch-{STAGE}/webhooks/*",
        # SES sandbox recipients, conditioned on the configured sender (tested above).
        "arn:aws:ses:eu-west-1:123456789012:identity/*",
        # Approvals' one-time wake-ups, by name prefix (the group's name is generated).
        "arn:aws:scheduler:eu-west-1:123456789012:schedule/*/approval-timer-*",
        # The reconcile pass: the executions of this stage's one state machine.
        f"arn:aws:states:eu-west-1:123456789012:execution:langorch-{STAGE}-runs:*",
    }
    for role_id, statement in _all_role_statements(synth):
        for resource in as_list(statement["Resource"]):
            text = render(resource)
            if "*" in text and text != "*":
                assert text in allowed_patterns, (role_id, text)


def test_no_role_uses_aws_managed_policies(synth: Synth) -> None:
    for role_id, role in synth.of_type("AWS::IAM::Role").items():
        assert not role["Properties"].get("ManagedPolicyArns"), role_id
