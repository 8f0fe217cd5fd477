"""A run's lineage: its redrives and the runs forked from it or that it was forked from.

Pure models stored inside the run record (:class:`langorch.domain.runs.RunRecord`).
"""

from __future__ import annotations

from datetime import datetime

from pydantic import BaseModel, ConfigDict, Field, field_validator

MAX_REASON_CHARS = 500


class _Stored(BaseModel):
    # Stored records are read back by newer and older code: unknown fields are ignored.
    model_config = ConfigDict(extra="ignore")


MAX_LINEAGE = 20
"""Redrives and forks a record keeps (the timeline keeps every one)."""


class Redrive(_Stored):
    """One redrive of a run: who, when, why, from where, onto which version."""

    attempt: int = Field(ge=1)
    at: datetime
    actor: str | None = None
    reason: str | None = None
    from_step: str | None = None
    """The step the run went back to (``None``: its last good checkpoint)."""
    checkpoint_id: str | None = None
    from_version: int = Field(ge=1)
    to_version: int = Field(ge=1)
    forced: bool = False
    """An incompatible version move was accepted with ``--force``."""
    problems: list[str] = Field(default_factory=list)
    """What ``--force`` accepted (field paths and reasons)."""

    @field_validator("reason")
    @classmethod
    def _bounded_reason(cls, reason: str | None) -> str | None:
        if reason is None or len(reason) <= MAX_REASON_CHARS:
            return reason
        return reason[: MAX_REASON_CHARS - 1] + "…"


class ForkLink(_Stored):
    """A fork between two runs: the other run, the step it forked at, when and by whom."""

    run_id: str
    at_step: str
    checkpoint_id: str | None = None
    at: datetime | None = None
    actor: str | None = None
