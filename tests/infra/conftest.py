"""The stack, synthesized once per session: every infra test reads the same template.

Synthesis takes 10-20 s (a Node process runs aws-cdk-lib), so it is never repeated per test.
Assets are staged in a temporary directory and the layer is the unbuilt placeholder: these
tests are offline and need neither Docker nor pip downloads.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

# jsii warns on every start under Node 20 (end of life); silence it in test output only.
os.environ.setdefault("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "20")
# CDK's built-in CloudFormation validation (aws-cdk-lib 2.27x; its findings are errors here, as
# cdk.json sets @aws-cdk/core:validateAgainstDefaultRules) checks each template against the
# resource schemas in a WebAssembly engine that Node compiles once per process: ~15 s of CPU in
# the session's first synthesis, 18 of the 30 s that two syntheses cost. Every template these
# tests synthesize is also cfn-linted against the resource schemas (test_compliance and each
# variant's lint test), so they keep that one validator; `make synth` and `cdk deploy` run both.
os.environ.setdefault("CDK_VALIDATION", "false")

STAGE = "test"
CONTEXT: dict[str, Any] = {
    "stage": STAGE,
    "sender_email": "approvals@example.org",
    "default_approvers": "alice@example.org,bob@example.org",
    "llm_provider": "bedrock",
    "llm_model": "anthropic.claude-3-haiku-20240307-v1:0",
    "alarm_email": "ops@example.org",
    "account": "123456789012",
    "region": "eu-west-1",
    "mcp_servers": "https://tools.example.org/mcp",
    "mcp_secrets": "langorch-test/tools/orders",
    "event_workflows": str(
        Path(__file__).parents[1] / "fixtures" / "workflows" / "event_triggers.yaml"
    ),
}


@dataclass
class Synth:
    """One synthesized stack."""

    stack: Any
    template: dict[str, Any]
    outdir: Path
    error: Exception | None

    @property
    def resources(self) -> dict[str, dict[str, Any]]:
        return self.template["Resources"]

    def of_type(self, kind: str) -> dict[str, dict[str, Any]]:
        """Resources of one CloudFormation type by logical id."""
        return {k: v for k, v in self.resources.items() if v["Type"] == kind}

    def logical_id(self, construct: Any) -> str:
        """The logical id of an L2 construct's CloudFormation resource."""
        node = construct.node.default_child or construct
        return str(self.stack.get_logical_id(node))

    def validation_report(self) -> dict[str, Any] | None:
        path = self.outdir / "validation-report.json"
        return json.loads(path.read_text()) if path.exists() else None


@pytest.fixture(scope="session")
def synth(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Synth]:
    from infra.app import build_app

    root = tmp_path_factory.mktemp("cdk")
    context = {**CONTEXT, "build_dir": str(root / "build")}
    app, stack = build_app(outdir=str(root / "cdk.out"), context=context)
    error: Exception | None = None
    try:
        app.synth()
    except RuntimeError as exc:  # cdk-nag findings: the template is written before validation
        error = exc
    template = json.loads((root / "cdk.out" / f"{stack.stack_name}.template.json").read_text())
    yield Synth(stack=stack, template=template, outdir=root / "cdk.out", error=error)


class Synthesized:
    """The stack synthesized for each distinct context, once per session (cdk-nag checked,
    raising on an unacknowledged finding), and each template's cfn-lint findings once: test
    files that need the same variant share one synthesis and one lint."""

    def __init__(self, root: Path) -> None:
        self._root = root
        self._built: dict[str, Synth] = {}
        self._linted: dict[tuple[str, str], list[tuple[str, str, str]]] = {}
        self._linters: dict[str, Any] = {}

    def __call__(self, extra: dict[str, Any]) -> Synth:
        """The stack for ``CONTEXT`` updated with ``extra``."""
        from infra.app import build_app

        key = json.dumps(extra, sort_keys=True)
        if key not in self._built:
            outdir = self._root / f"cdk.out-{len(self._built)}"
            context = {**CONTEXT, "build_dir": str(self._root / "build"), **extra}
            app, stack = build_app(outdir=str(outdir), context=context)
            app.synth()  # raises on any cdk-nag finding
            template = json.loads((outdir / f"{stack.stack_name}.template.json").read_text())
            self._built[key] = Synth(stack=stack, template=template, outdir=outdir, error=None)
        return self._built[key]

    def lint(self, synthesized: Synth) -> list[tuple[str, str, str]]:
        """cfn-lint's findings on ``synthesized`` in its region: (rule id, message, where).

        One cfn-lint runner per region lints every template of the session, as the ``cfn-lint``
        command does the templates it is given (``cfnlint.api.lint`` would load its ~300 rules
        again for each, ~1 s of CPU a template).
        """
        from cfnlint.config import ConfigMixIn
        from cfnlint.decode.decode import decode_str
        from cfnlint.runner import Runner

        text = json.dumps(synthesized.template)
        region = str(synthesized.stack.region)
        if (text, region) not in self._linted:
            if region not in self._linters:
                self._linters[region] = Runner(ConfigMixIn(regions=[region]))
            template, errors = decode_str(text)
            assert template is not None and not errors, errors
            matches = self._linters[region].validate_template(template)
            self._linted[text, region] = [(m.rule.id, m.message, str(m.path)) for m in matches]
        return self._linted[text, region]


@pytest.fixture(scope="session")
def synthesized(tmp_path_factory: pytest.TempPathFactory) -> Synthesized:
    """Variants of the stack, each synthesized (and linted) once per session."""
    return Synthesized(tmp_path_factory.mktemp("variants"))


@pytest.fixture(scope="session")
def template(synth: Synth) -> Any:
    """The template as a CDK ``assertions.Template`` (matchers)."""
    from aws_cdk.assertions import Template

    return Template.from_json(synth.template)
