"""The stack's dead-letter queues (SQS) and their one target, the trigger function (Lambda)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from langorch.app.dead_letters import Letter
from langorch.domain.errors import StorageError


def parse_queues(text: str) -> dict[str, str]:
    """``name=arn`` pairs, comma-separated (the stack's ``DeadLetterQueues`` output)."""
    pairs = (part.split("=", 1) for part in text.split(",") if "=" in part)
    return {name.strip(): arn.strip() for name, arn in pairs}


class SqsDeadLetters:
    """Reads and deletes letters; delivers their events to the trigger function again.

    Args:
        sqs: a boto3 ``sqs`` client.
        lambda_client: a boto3 ``lambda`` client.
        queues: queue name -> queue ARN.
        target_arn: the function every queue's events were for (the trigger).
    """

    def __init__(
        self, sqs: Any, lambda_client: Any, queues: Mapping[str, str], target_arn: str | None
    ) -> None:
        self._sqs = sqs
        self._lambda = lambda_client
        self._queues = dict(queues)
        self._target = target_arn
        self._urls: dict[str, str] = {}

    def names(self) -> list[str]:
        """The queues' names."""
        return sorted(self._queues)

    def receive(self, name: str, most: int) -> list[Letter]:
        """Up to ``most`` letters, hidden from other readers while handled."""
        try:
            answer = self._sqs.receive_message(
                QueueUrl=self._url(name), MaxNumberOfMessages=most, WaitTimeSeconds=0
            )
        except (ClientError, BotoCoreError) as exc:
            raise StorageError(f"cannot read dead-letter queue {name}: {exc}") from exc
        return [Letter(m["ReceiptHandle"], m["Body"]) for m in answer.get("Messages", [])]

    def delete(self, name: str, receipt: str) -> None:
        """Delete a delivered letter."""
        try:
            self._sqs.delete_message(QueueUrl=self._url(name), ReceiptHandle=receipt)
        except (ClientError, BotoCoreError) as exc:
            raise StorageError(f"dead-letter queue {name}: cannot remove a letter: {exc}") from exc

    def redeliver(self, name: str, event: dict[str, Any]) -> None:
        """Invoke the trigger asynchronously with ``event``, as the service that gave up would."""
        if not self._target:
            raise StorageError(
                f"no trigger function is configured to take queue {name}'s events again "
                "(LANGORCH_TRIGGER_FUNCTION_ARN, the stack's TriggerFunctionArn output)"
            )
        try:
            self._lambda.invoke(
                FunctionName=self._target,
                InvocationType="Event",
                Payload=json.dumps(event).encode("utf-8"),
            )
        except (ClientError, BotoCoreError) as exc:
            raise StorageError(f"cannot deliver queue {name}'s event again: {exc}") from exc

    def _url(self, name: str) -> str:
        if name not in self._urls:
            # arn:aws:sqs:<region>:<account>:<queue name>
            _, _, _, _, account, queue = self._queues[name].split(":", 5)
            try:
                self._urls[name] = self._sqs.get_queue_url(
                    QueueName=queue, QueueOwnerAWSAccountId=account
                )["QueueUrl"]
            except (ClientError, BotoCoreError) as exc:
                raise StorageError(f"cannot find dead-letter queue {name}: {exc}") from exc
        return self._urls[name]
