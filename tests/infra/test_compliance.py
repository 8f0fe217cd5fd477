"""cdk-nag AwsSolutions passes (every acknowledgement has a reason) and cfn-lint passes."""

from __future__ import annotations

import json

from tests.infra.conftest import Synth, Synthesized


def test_cdk_nag_aws_solutions_reports_no_unacknowledged_finding(synth: Synth) -> None:
    report = synth.validation_report()
    violations = [
        f"{v['ruleName']} at {c['constructPath']}"
        for plugin in (report or {}).get("pluginReports", [])
        for v in plugin["violations"]
        for c in v["violatingConstructs"]
    ]
    assert synth.error is None and not violations, "\n".join(violations) or str(synth.error)


def test_every_acknowledgement_has_a_written_reason(synth: Synth) -> None:
    metadata = json.loads((synth.outdir / f"{synth.stack.stack_name}.metadata.json").read_text())
    acknowledged = {
        (path, rule): reason
        for path, entries in metadata.items()
        for entry in entries
        if entry["type"] == "aws:cdk:acknowledged-rules"
        for rule, reason in entry["data"].items()
    }
    assert acknowledged, "no acknowledgements recorded: is cdk-nag still wired?"
    for (path, rule), reason in acknowledged.items():
        # cdk-nag findings, and CDK's own warnings (the SnapStart one) acknowledged alike.
        assert "AwsSolutions-" in rule or "@aws-cdk/" in rule, (path, rule)
        # A reason says why the finding is safe here, not just that it is accepted.
        assert len(reason.split()) >= 12, (path, rule, reason)


ACCEPTED_LINT = {
    # CDK adds an explicit DependsOn on each function's role and default policy; the GetAtt
    # already orders the role, the DependsOn also orders the policy. Harmless.
    "W3005",
}


def test_cfn_lint_passes_on_the_synthesized_template(
    synth: Synth, synthesized: Synthesized
) -> None:
    # Linted for the region the stack deploys to: SES and SnapStart exist in most regions,
    # not all, and cfn-lint would otherwise check every region.
    problems = [
        f"{rule} {message} ({where})"
        for rule, message, where in synthesized.lint(synth)
        # I*: informational style hints (e.g. prefer Fn::Sub) on CDK-generated intrinsics.
        if not rule.startswith("I") and rule not in ACCEPTED_LINT
    ]
    assert problems == [], "\n".join(problems)
