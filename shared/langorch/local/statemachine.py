"""The run state machine in the emulator: the package's ASL file, executed by moto.

``definition_with`` is the one place the ASL's substitution variables are filled in; local
mode uses it with the emulator's function ARNs, and CDK tests use it to compare the deployed
definition with the local one.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from importlib import resources
from typing import Any

from botocore.exceptions import ClientError

from langorch.domain.errors import StorageError

STATE_MACHINE_NAME = "langorch-runs"
ASL_FILE = "statemachine.asl.json"

SUBSTITUTIONS: Mapping[str, str] = {
    "RunSegmentFunctionArn": "run_segment",
    "RequestApprovalFunctionArn": "request_approval",
}
"""ASL substitution variable -> handler package whose function ARN fills it."""

LOCAL_VALUES: Mapping[str, str] = {"Partition": "aws"}
"""Variables that are not function ARNs: CDK fills ``Partition`` with the stack's partition."""

_VARIABLE = re.compile(r"\$\{([A-Za-z0-9_]+)\}")


def asl_text() -> str:
    """The state machine definition as shipped in the package (with its ``${...}`` variables)."""
    return resources.files("langorch").joinpath(ASL_FILE).read_text(encoding="utf-8")


def definition_with(arns: Mapping[str, str]) -> str:
    """The ASL with every ``${Variable}`` replaced.

    Args:
        arns: substitution variable -> value (``{"RunSegmentFunctionArn": "arn:…", …}``).

    Returns:
        The definition as JSON text, ready for ``CreateStateMachine``.

    Raises:
        KeyError: a variable of the ASL has no value (naming the missing variables).
    """
    text = asl_text()
    values = {**LOCAL_VALUES, **arns}
    missing = sorted(set(_VARIABLE.findall(text)) - set(values))
    if missing:
        raise KeyError(f"no value for the state machine's {', '.join(missing)}")
    filled = _VARIABLE.sub(lambda m: values[m.group(1)], text)
    json.loads(filled)  # a value that broke the JSON fails here, not at CreateStateMachine
    return filled


def substitutions_for(function_arns: Mapping[str, str]) -> dict[str, str]:
    """The substitution values from handler package -> function ARN."""
    return {variable: function_arns[package] for variable, package in SUBSTITUTIONS.items()}


def _ensure_role(iam: Any) -> str:
    name = "langorch-local-states"
    try:
        return str(iam.get_role(RoleName=name)["Role"]["Arn"])
    except ClientError as exc:
        if exc.response["Error"]["Code"] != "NoSuchEntity":
            raise StorageError(f"cannot read role {name}: {exc}") from exc
    trust = {
        "Version": "2012-10-17",
        "Statement": [
            {
                "Effect": "Allow",
                "Principal": {"Service": "states.amazonaws.com"},
                "Action": "sts:AssumeRole",
            }
        ],
    }
    try:
        role = iam.create_role(RoleName=name, AssumeRolePolicyDocument=json.dumps(trust))
    except ClientError as exc:
        raise StorageError(f"cannot create role {name}: {exc}") from exc
    return str(role["Role"]["Arn"])


def ensure_state_machine(sfn_client: Any, iam_client: Any, function_arns: Mapping[str, str]) -> str:
    """Create (or update) the run state machine from the package's ASL.

    Args:
        sfn_client: a boto3 ``stepfunctions`` client at the emulator.
        iam_client: a boto3 ``iam`` client at the emulator.
        function_arns: handler package -> function ARN (from ``ensure_functions``).

    Returns:
        The state machine's ARN.
    """
    definition = definition_with(substitutions_for(function_arns))
    role = _ensure_role(iam_client)
    try:
        created = sfn_client.create_state_machine(
            name=STATE_MACHINE_NAME, definition=definition, roleArn=role, type="STANDARD"
        )
        return str(created["stateMachineArn"])
    except ClientError as exc:
        if exc.response["Error"]["Code"] != "StateMachineAlreadyExists":
            raise StorageError(f"cannot create the state machine: {exc}") from exc
    arn = next(
        str(m["stateMachineArn"])
        for m in sfn_client.list_state_machines()["stateMachines"]
        if m["name"] == STATE_MACHINE_NAME
    )
    sfn_client.update_state_machine(stateMachineArn=arn, definition=definition, roleArn=role)
    return arn
