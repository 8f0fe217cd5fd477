"""Which langorch deployment a CLI command talks to: the CLI's composition root.

The environment is read here and nowhere else in the CLI. In order of precedence:

1. ``--endpoint-url URL`` or ``LANGORCH_ENDPOINT_URL``: an AWS-compatible endpoint (the local
   emulator, a test server); resource names from ``LANGORCH_*`` settings.
2. ``--stack NAME``: a deployed stack; resource names from its CloudFormation outputs.
3. The local stack file ``<home>/stack.json`` written by ``langorch dev``, where the home is
   ``--home DIR``, else ``LANGORCH_HOME``, else ``./.langorch``:
   ``{"endpoint_url": ..., "settings": {<Settings fields>}}``.
4. Otherwise: :class:`TargetError` telling how to start or name a stack.
"""

from __future__ import annotations

import json
import os
import socket
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from langorch.domain.errors import LangorchError

if TYPE_CHECKING:
    from pydantic import ValidationError

    from langorch.config import Settings

STACK_FILE = "stack.json"
DEFAULT_HOME = ".langorch"

OUTPUT_FIELDS: Mapping[str, str] = {
    "DefinitionsTable": "definitions_table",
    "RunsTable": "runs_table",
    "CheckpointsTable": "checkpoints_table",
    "MemoryTable": "memory_table",
    "Bucket": "bucket",
}
"""CloudFormation output key of the deployed stack -> ``Settings`` field (required)."""

OPTIONAL_OUTPUT_FIELDS: Mapping[str, str] = {
    "CheckpointPrefix": "checkpoint_prefix",
    "StateMachineArn": "state_machine_arn",
    "PublicBaseUrl": "public_base_url",
    "TriggerFunctionArn": "trigger_function_arn",
    "SchedulerGroup": "scheduler_group",
    "SchedulerRoleArn": "scheduler_role_arn",
    "ScheduleDlqArn": "schedule_dlq_arn",
    "DeadLetterQueues": "dead_letter_queues",
    "LinkSigningSecret": "link_signing_secret",
    "LlmApiKeySecret": "llm_api_key_secret",
    "WebhookSecretPrefix": "webhook_secret_prefix",
    "SlackSecret": "slack_secret",
    "SenderEmail": "sender_email",
    "SesConfigurationSet": "ses_configuration_set",
    "LogGroupPrefix": "log_group_prefix",
}
"""Outputs the pipeline commands use; a stack without them still serves the definitions."""

StackOutputs = Callable[[str, "Settings"], Mapping[str, str]]


class TargetError(LangorchError):
    """No deployment to talk to, or its description is unusable."""


@dataclass(frozen=True)
class Target:
    """A resolved deployment.

    Attributes:
        settings: where its resources are.
        source: how it was found, for messages (``"--endpoint-url"``, ``"stack prod"``, …).
        explicit: True when named on the command line or in the environment, False for the
            local stack file found by default.
    """

    settings: Settings
    source: str
    explicit: bool

    @property
    def name(self) -> str:
        """The deployment as a person calls it: "the local stack", "stack prod", an endpoint."""
        if not self.explicit:
            return "the local stack"
        if self.source.startswith("stack "):
            return self.source
        return f"the endpoint {self.settings.endpoint_url}"


def _cloudformation_outputs(stack: str, settings: Settings) -> Mapping[str, str]:
    # Imported here: boto3 is only needed when a deployed stack is named.
    from langorch.adapters.aws import make_client
    from langorch.adapters.cloudformation import stack_outputs

    return stack_outputs(make_client("cloudformation", settings), stack)


def _profile_region(profile: str | None) -> str | None:
    from langorch.adapters.aws import profile_region

    return profile_region(profile)


def aws_region(
    env: Mapping[str, str], profile_region: Callable[[str | None], str | None] = _profile_region
) -> str | None:
    """The region the AWS CLI and SDKs would use: ``AWS_REGION``, ``AWS_DEFAULT_REGION``, then
    the region of the profile (``AWS_PROFILE``, else ``default``) in ``~/.aws/config``."""
    return (
        env.get("AWS_REGION")
        or env.get("AWS_DEFAULT_REGION")
        or profile_region(env.get("AWS_PROFILE"))
    )


def resolve_target(
    *,
    endpoint_url: str | None = None,
    stack: str | None = None,
    region: str | None = None,
    home: str | None = None,
    env: Mapping[str, str] | None = None,
    cwd: Path | None = None,
    outputs: StackOutputs = _cloudformation_outputs,
    profile_region: Callable[[str | None], str | None] = _profile_region,
) -> Target:
    """Find the deployment to talk to.

    Args:
        endpoint_url: ``--endpoint-url``.
        stack: ``--stack``.
        region: ``--region`` (default: ``LANGORCH_REGION``; with ``--stack``, then the AWS
            SDK's own resolution, see :func:`aws_region`; else us-east-1).
        home: ``--home``: the local stack's folder (default: ``LANGORCH_HOME``, then
            ``./.langorch``).
        env: the environment (default: ``os.environ``); only ``LANGORCH_*`` is read.
        cwd: where a relative home is resolved (default: the current directory).
        outputs: reads a stack's outputs (injected in tests).
        profile_region: a profile's configured region (injected in tests).

    Raises:
        TargetError: nothing to talk to, or the stack file / outputs are unusable.
        NotFoundError: ``--stack`` names a stack that does not exist.
    """
    env = os.environ if env is None else env
    stack_file = local_home(home, env=env, cwd=cwd) / STACK_FILE
    if not (endpoint_url or stack or _names_endpoint(env) or stack_file.is_file()):
        # Nothing to talk to, said before the settings are read: building their model was a
        # tenth of what an offline `workflows validate` cost (issue 26).
        raise _no_stack(stack_file)
    overrides: dict[str, Any] = {"region": region} if region else {}
    if stack and not region and not env.get("LANGORCH_REGION"):
        # A deployed stack lives where the operator's AWS configuration points.
        found_region = aws_region(env, profile_region)
        if found_region:
            overrides["region"] = found_region
    base = _settings(env, overrides)
    if endpoint_url or base.endpoint_url:
        url = endpoint_url or base.endpoint_url
        source = "--endpoint-url" if endpoint_url else "LANGORCH_ENDPOINT_URL"
        return Target(base.model_copy(update={"endpoint_url": url}), source, explicit=True)
    if stack:
        found = outputs(stack, base)
        missing = [key for key in OUTPUT_FIELDS if key not in found]
        if missing:
            raise TargetError(
                f"stack {stack!r} lacks the outputs {', '.join(missing)}: is it a langorch stack?"
            )
        fields = {field: found[key] for key, field in OUTPUT_FIELDS.items()}
        fields.update(
            {field: found[key] for key, field in OPTIONAL_OUTPUT_FIELDS.items() if key in found}
        )
        return Target(base.model_copy(update=fields), f"stack {stack}", explicit=True)
    if stack_file.is_file():
        return Target(_local_settings(stack_file, env, overrides), str(stack_file), explicit=False)
    raise _no_stack(stack_file)


def _names_endpoint(env: Mapping[str, str]) -> bool:
    """Whether ``env`` sets ``LANGORCH_ENDPOINT_URL`` (any case), as ``Settings`` reads it."""
    return any(name.upper() == "LANGORCH_ENDPOINT_URL" and env[name] for name in env)


def _no_stack(stack_file: Path) -> TargetError:
    return TargetError(
        f"no local stack running ({stack_file} not found): start one with `langorch dev` "
        "(`make dev`), point at its folder with --home DIR or LANGORCH_HOME, "
        "or pass --stack NAME"
    )


def endpoint_reachable(url: str, timeout: float = 0.5) -> bool:
    """Whether something accepts TCP connections at ``url``'s host and port.

    A quick probe before talking to a local stack that may have stopped; botocore would retry
    a refused connection for seconds.
    """
    parts = urlsplit(url)
    if not parts.hostname:
        return False
    port = parts.port or (443 if parts.scheme == "https" else 80)
    try:
        with socket.create_connection((parts.hostname, port), timeout=timeout):
            return True
    except OSError:
        return False


def local_home(
    home: str | None = None, *, env: Mapping[str, str] | None = None, cwd: Path | None = None
) -> Path:
    """The local stack's folder: ``--home``, else ``LANGORCH_HOME``, else ``./.langorch``.

    ``langorch dev`` and every other command resolve it here, so a stack started with
    ``--home X`` is found by commands given ``--home X`` (or ``LANGORCH_HOME=X``).

    Args:
        home: ``--home`` as given.
        env: the environment (default: ``os.environ``).
        cwd: where a relative home is resolved (default: the current directory).
    """
    env = os.environ if env is None else env
    folder = Path(home or env.get("LANGORCH_HOME") or DEFAULT_HOME).expanduser()
    return folder if folder.is_absolute() else (cwd or Path.cwd()) / folder


def _settings(env: Mapping[str, str], overrides: Mapping[str, Any]) -> Settings:
    # Imported here: `--help` and offline commands never pay for pydantic.
    from pydantic import ValidationError

    from langorch.config import Settings, SettingsError, from_environment

    # `env` read as Settings() reads the environment (lists and dicts as JSON), passed
    # explicitly so that it, not the process's environment, is what the command uses.
    try:
        return Settings.model_validate({**from_environment(env), **overrides})
    except SettingsError as exc:
        raise TargetError(f"invalid LANGORCH_* setting: {exc}") from None
    except ValidationError as exc:
        raise TargetError(f"invalid LANGORCH_* setting: {_first_error(exc)}") from exc


def _local_settings(path: Path, env: Mapping[str, str], overrides: Mapping[str, Any]) -> Settings:
    from pydantic import ValidationError

    from langorch.config import Settings

    try:
        document = json.loads(path.read_text(encoding="utf-8"))
        stack_settings = dict(document.get("settings") or {})
        stack_settings["endpoint_url"] = document.get("endpoint_url") or stack_settings.get(
            "endpoint_url"
        )
    except (OSError, ValueError, AttributeError) as exc:
        raise TargetError(f"unreadable local stack file {path}: {exc}") from exc
    if not stack_settings["endpoint_url"]:
        raise TargetError(f"local stack file {path} has no endpoint_url: restart `make dev`")
    base = _settings(env, {})
    try:
        return Settings.model_validate({**base.model_dump(), **stack_settings, **overrides})
    except ValidationError as exc:
        raise TargetError(f"invalid local stack file {path}: {_first_error(exc)}") from exc


def _first_error(exc: ValidationError) -> str:
    error = exc.errors()[0]
    where = ".".join(str(part) for part in error["loc"])
    return f"{where}: {error['msg']}" if where else str(error["msg"])
