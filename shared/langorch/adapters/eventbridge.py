"""EventBridge: put one event on a bus (``langorch events send``).

Only I/O. Rules aimed at the trigger function are the stack's (``infra/constructs/triggers.py``);
what a matching event starts is :func:`langorch.app.triggers.handle_event`.
"""

from __future__ import annotations

import json
from typing import Any

from botocore.exceptions import ClientError

from langorch.domain.errors import StorageError
from langorch.domain.triggers import PutEvent


class EventBridgeBus:
    """Puts events on EventBridge buses.

    Args:
        client: a boto3 ``events`` client.
    """

    def __init__(self, client: Any) -> None:
        self._client = client

    def put(self, bus: str, source: str, detail_type: str, detail: dict[str, Any]) -> PutEvent:
        """Put one event (``events:PutEvents``).

        Raises:
            StorageError: EventBridge refused the call or the entry.
        """
        entry = {
            "EventBusName": bus,
            "Source": source,
            "DetailType": detail_type,
            "Detail": json.dumps(detail),
        }
        try:
            answer = self._client.put_events(Entries=[entry])
        except ClientError as exc:
            raise StorageError(f"EventBridge refused the event on bus {bus}: {exc}") from exc
        result = answer["Entries"][0]
        if answer.get("FailedEntryCount") or "EventId" not in result:
            raise StorageError(
                f"EventBridge refused the event on bus {bus}: "
                f"{result.get('ErrorCode')} {result.get('ErrorMessage')}"
            )
        return PutEvent(str(result["EventId"]), bus)
