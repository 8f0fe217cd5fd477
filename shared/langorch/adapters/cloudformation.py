"""CloudFormation: read a deployed stack's outputs (where its tables and bucket are)."""

from __future__ import annotations

from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from langorch.domain.errors import NotFoundError, StorageError


def stack_outputs(client: Any, stack_name: str) -> dict[str, str]:
    """The outputs of one stack, as ``OutputKey -> OutputValue``.

    Args:
        client: a boto3 CloudFormation client (its region is the stack's region).
        stack_name: the stack's name or id.

    Raises:
        NotFoundError: no such stack in the client's region and account.
        StorageError: CloudFormation could not be asked (credentials, network, throttling).
    """
    try:
        response = client.describe_stacks(StackName=stack_name)
    except ClientError as exc:
        error = exc.response.get("Error", {})
        # CloudFormation reports a missing stack as a generic ValidationError.
        if error.get("Code") == "ValidationError" and "does not exist" in str(error.get("Message")):
            raise NotFoundError(
                f"stack {stack_name!r} not found in {client.meta.region_name} "
                "(check --stack and --region)"
            ) from exc
        raise StorageError(f"cannot read stack {stack_name!r}: {exc}") from exc
    except BotoCoreError as exc:
        raise StorageError(f"cannot read stack {stack_name!r}: {exc}") from exc
    stacks = response.get("Stacks") or []
    if not stacks:
        raise NotFoundError(f"stack {stack_name!r} not found in {client.meta.region_name}")
    return {
        str(output["OutputKey"]): str(output["OutputValue"])
        for output in stacks[0].get("Outputs") or []
    }
