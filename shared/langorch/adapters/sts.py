"""STS: who the process's AWS credentials belong to (``langorch console`` against a stack)."""

from __future__ import annotations

from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from langorch.domain.errors import StorageError


class CallerIdentity:
    """The IAM principal behind a client's credentials.

    Args:
        client: a boto3 ``sts`` client.
    """

    def __init__(self, client: Any) -> None:
        self._client = client

    def principal_arn(self) -> str:
        """The caller's ARN (``GetCallerIdentity``, which needs no IAM permission).

        Raises:
            StorageError: no credentials, or STS cannot be reached.
        """
        try:
            return str(self._client.get_caller_identity()["Arn"])
        except (ClientError, BotoCoreError) as exc:
            raise StorageError(f"cannot tell whose AWS credentials these are: {exc}") from exc
