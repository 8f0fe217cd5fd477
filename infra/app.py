"""The CDK app: ``python -m infra.app`` synthesizes offline (no CDK CLI, no credentials).

``cdk.json`` points the CDK CLI here too, so ``make synth``, ``make deploy`` and the tests
build the same stack. Configuration: the ``langorch`` object in ``cdk.json``, overridden with
``-c key=value`` (see ``infra.config``).
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

from aws_cdk import App, Environment, Tags, Validations
from cdk_nag import AwsSolutionsChecks

from infra.config import DeployConfig
from infra.constructs.bundling import REPO_ROOT
from infra.stack import LangorchStack


def build_app(
    *, outdir: str | None = None, context: dict[str, Any] | None = None
) -> tuple[App, LangorchStack]:
    """The app and its one stack, with cdk-nag checking every construct.

    Args:
        outdir: the cloud assembly directory (default: ``$CDK_OUTDIR`` when run by the CDK
            CLI, else ``cdk.out``).
        context: extra context (tests); ``cdk.json`` and ``-c`` reach the app through the
            CLI's ``CDK_CONTEXT_JSON``.
    """
    app = App(
        outdir=outdir or os.environ.get("CDK_OUTDIR") or str(REPO_ROOT / "cdk.out"),
        context=context,
    )
    if app.node.try_get_context("langorch") is None:
        # `python -m infra.app` without the CLI (make synth, tests): the CLI would have passed
        # cdk.json's context in CDK_CONTEXT_JSON, so read it here.
        cdk_json = json.loads((REPO_ROOT / "cdk.json").read_text(encoding="utf-8"))
        for key, value in cdk_json.get("context", {}).items():
            app.node.set_context(key, value)
    config = DeployConfig.from_context(app.node.try_get_context)
    build_dir = Path(config.build_dir) if config.build_dir else REPO_ROOT / "build" / "infra"
    env = Environment(
        account=config.account or os.environ.get("CDK_DEFAULT_ACCOUNT"),
        region=config.region or os.environ.get("CDK_DEFAULT_REGION"),
    )
    stack = LangorchStack(
        app,
        config.stack_name,
        config=config,
        build_dir=build_dir,
        env=env,
        description=f"langorch {config.stage}: AI workflows as an event-driven pipeline",
    )
    Tags.of(stack).add("project", "langorch")
    Tags.of(stack).add("stage", config.stage)
    Validations.of(app).add_plugins(AwsSolutionsChecks(app, verbose=True))
    return app, stack


def context_from_args(args: list[str]) -> dict[str, str]:
    """``-c key=value`` pairs, as the CDK CLI takes them (``make synth CDK_ARGS=...``).

    Raises:
        SystemExit: an argument is not ``-c key=value``.
    """
    context: dict[str, str] = {}
    pending = list(args)
    while pending:
        flag = pending.pop(0)
        pair = pending.pop(0) if flag in ("-c", "--context") and pending else flag
        key, sep, value = pair.partition("=")
        if flag not in ("-c", "--context") or not sep or not key:
            raise SystemExit(f"python -m infra.app: expected -c key=value, got {flag!r}")
        context[key] = value
    return context


def main() -> None:
    """Synthesize into the cloud assembly directory; a bad setting is one line and exit 2."""
    from infra.config import ConfigError

    _say_if_node_is_old()
    try:
        app, _ = build_app(context=context_from_args(sys.argv[1:]) or None)
    except ConfigError as exc:
        print(f"error: {exc}", file=sys.stderr)
        raise SystemExit(2) from None
    try:
        app.synth()
    except RuntimeError as exc:  # jsii's traceback says only "ValidationFailed"
        if not str(exc).startswith("ValidationFailed"):
            raise
        for line in _violations(Path(app.outdir) / "validation-report.json"):
            print(f"error: {line}", file=sys.stderr)
        raise SystemExit(1) from None


def _violations(report: Path) -> list[str]:
    """Each cdk-nag finding of a failed synth as one line: the rule and what breaks it."""
    found = json.loads(report.read_text())
    return [
        f"{violation['ruleName']} on {construct['constructPath']}"
        for plugin in found.get("pluginReports", [])
        for violation in plugin.get("violations", [])
        for construct in violation.get("violatingConstructs", [])
    ] or [f"synth validation failed; see {report}"]


SUPPORTED_NODE = 22
"""The oldest Node.js the pinned CDK CLI and jsii support (README, Deploying to AWS)."""


def _say_if_node_is_old() -> None:
    import shutil
    import subprocess

    node = shutil.which("node")
    if node is None:
        return
    found = subprocess.run([node, "--version"], capture_output=True, text=True, check=False)
    major = found.stdout.strip().lstrip("v").split(".")[0]
    if major.isdigit() and int(major) < SUPPORTED_NODE:
        print(
            f"note: Node.js {found.stdout.strip()} is out of support; synth works, but use Node.js "
            f"{SUPPORTED_NODE} or newer to deploy (the CDK CLI warns on every command)",
            file=sys.stderr,
        )


if __name__ == "__main__":
    main()
