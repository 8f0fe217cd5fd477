"""Log lines as every log store reads and writes them (CloudWatch Logs, the local SQLite file).

Kept apart from :mod:`langorch.adapters.logs` so the local store and ``langorch runs logs``
against a local home read them without importing botocore (issue 26: a command in 0.3 s).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

Event = tuple[int, str]
"""A log event to write: ``(epoch milliseconds, message)``."""


@dataclass(frozen=True)
class LogLine:
    """One log event: where it was written, when (epoch milliseconds) and the line itself."""

    group: str
    stream: str
    timestamp: int
    message: str

    def fields(self) -> dict[str, Any] | None:
        """The line as JSON (Powertools writes one object per line), else ``None``."""
        try:
            value = json.loads(self.message)
        except ValueError:
            return None
        return value if isinstance(value, dict) else None
