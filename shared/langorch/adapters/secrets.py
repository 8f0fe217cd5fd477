"""Secrets Manager: link-signing keys, webhook secrets, LLM keys. Values are never logged."""

from __future__ import annotations

import json
from typing import Any

from botocore.exceptions import ClientError

from langorch.domain.errors import SecretNotFoundError, StorageError

DEFAULT_MAX_AGE_SECONDS = 300
"""Secrets are cached this long per process: rotation takes effect within it."""


class Secrets:
    """JSON secrets, read through Powertools' cached ``SecretsProvider``.

    Args:
        client: a boto3 ``secretsmanager`` client.
        max_age: seconds a read value is reused.
    """

    def __init__(self, client: Any, *, max_age: int = DEFAULT_MAX_AGE_SECONDS) -> None:
        self._client = client
        self._max_age = max_age
        self._provider: Any = None

    def get_json(self, name: str, *, fresh: bool = False) -> dict[str, Any]:
        """The secret's JSON value.

        Raises:
            SecretNotFoundError: no such secret.
        """
        from aws_lambda_powertools.utilities.parameters import SecretsProvider
        from aws_lambda_powertools.utilities.parameters.exceptions import GetParameterError

        if self._provider is None:
            self._provider = SecretsProvider(boto3_client=self._client)
        try:
            value = self._provider.get(
                name, transform="json", max_age=self._max_age, force_fetch=fresh
            )
        except GetParameterError as exc:
            # Powertools re-raises inside its except block: the ClientError is the context.
            cause = exc.__cause__ or exc.__context__
            if isinstance(cause, ClientError) and cause.response["Error"]["Code"] == (
                "ResourceNotFoundException"
            ):
                raise SecretNotFoundError(f"secret {name} does not exist") from exc
            raise StorageError(f"cannot read secret {name}") from exc
        if not isinstance(value, dict):
            raise StorageError(f"secret {name} is not a JSON object")
        return value

    def put_json(self, name: str, value: dict[str, Any], *, description: str = "") -> bool:
        """Create the secret, or store a new version of it.

        Returns:
            Whether the secret was created (``False``: updated).
        """
        text = json.dumps(value)
        try:
            self._client.create_secret(Name=name, SecretString=text, Description=description)
            return True
        except ClientError as exc:
            if exc.response["Error"]["Code"] != "ResourceExistsException":
                raise StorageError(f"cannot create secret {name}") from exc
        try:
            self._client.put_secret_value(SecretId=name, SecretString=text)
        except ClientError as exc:
            raise StorageError(f"cannot update secret {name}") from exc
        return False

    def replace_json(self, name: str, value: dict[str, Any]) -> None:
        """Store a new version of an existing secret (named, or by ARN as the stack outputs).

        Raises:
            SecretNotFoundError: no such secret.
            StorageError: it cannot be written.
        """
        try:
            self._client.put_secret_value(SecretId=name, SecretString=json.dumps(value))
        except ClientError as exc:
            if exc.response["Error"]["Code"] == "ResourceNotFoundException":
                raise SecretNotFoundError(f"secret {name} does not exist") from exc
            raise StorageError(f"cannot update secret {name}") from exc
        if self._provider is not None:
            self._provider.clear_cache()

    def exists(self, name: str) -> bool:
        """Whether the secret exists (no value is read)."""
        try:
            self._client.describe_secret(SecretId=name)
            return True
        except ClientError as exc:
            if exc.response["Error"]["Code"] == "ResourceNotFoundException":
                return False
            raise StorageError(f"cannot describe secret {name}") from exc

    def delete(self, name: str) -> None:
        """Delete the secret now (no recovery window); a missing secret is fine."""
        try:
            self._client.delete_secret(SecretId=name, ForceDeleteWithoutRecovery=True)
        except ClientError as exc:
            if exc.response["Error"]["Code"] != "ResourceNotFoundException":
                raise StorageError(f"cannot delete secret {name}") from exc
