"""Which version of a workflow runs: the *active* version, and the promotions that chose it.

A workflow's runs, triggers and schedules start its active version. ``workflows put`` makes the
version it stores active (as it always has); ``workflows put --draft`` stores a version without
activating it, and ``workflows promote`` activates one, recording who did, when, and the replay
gate's result (``langorch replay --out replay.json``). A gate whose verdict failed refuses the
promotion unless it is forced, and a forced promotion says so for ever.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from langorch.domain.errors import ConflictError, InputValidationError, Problem


class GateFailedError(ConflictError):
    """A promotion refused because its replay gate's verdict failed (``--force`` overrides)."""


@dataclass(frozen=True)
class Gate:
    """The result of the replay gate a promotion was checked against.

    Attributes:
        source: the report file it was read from.
        runs: how many recorded runs were replayed.
        failures: how many of them failed the gate.
        passed: the ``--fail-on`` verdict.
        fail_on: what the gate failed on (``path``, ``failure``, ``cost+20%``, …).
    """

    source: str
    runs: int
    failures: int
    passed: bool
    fail_on: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        """As stored and printed (``--json``)."""
        return {
            "source": self.source,
            "runs": self.runs,
            "failures": self.failures,
            "passed": self.passed,
            "fail_on": list(self.fail_on),
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Gate:
        """Read back what :meth:`to_dict` wrote."""
        return cls(
            source=str(data["source"]),
            runs=int(data["runs"]),
            failures=int(data["failures"]),
            passed=bool(data["passed"]),
            fail_on=tuple(str(k) for k in data.get("fail_on", [])),
        )

    def text(self) -> str:
        """One line: ``gate replay.json: 20 runs, 0 failing (fail on path): passed``."""
        on = f" (fail on {', '.join(self.fail_on)})" if self.fail_on else ""
        verdict = "passed" if self.passed else "FAILED"
        return f"gate {self.source}: {self.runs} runs, {self.failures} failing{on}: {verdict}"


@dataclass(frozen=True)
class Promotion:
    """One activation of a workflow version by ``workflows promote``.

    Attributes:
        workflow_id: the workflow.
        version: the version made active.
        previous_version: the version active before (``None``: none was).
        promoted_by: who promoted it.
        promoted_at: when.
        gate: the replay gate's result, when one was given.
        forced: promoted although the gate failed.
    """

    workflow_id: str
    version: int
    previous_version: int | None
    promoted_by: str
    promoted_at: datetime
    gate: Gate | None = None
    forced: bool = False

    def to_dict(self) -> dict[str, Any]:
        """As stored and printed (``--json``)."""
        return {
            "workflow_id": self.workflow_id,
            "version": self.version,
            "previous_version": self.previous_version,
            "promoted_by": self.promoted_by,
            "promoted_at": self.promoted_at.isoformat(),
            "gate": None if self.gate is None else self.gate.to_dict(),
            "forced": self.forced,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Promotion:
        """Read back what :meth:`to_dict` wrote."""
        gate = data.get("gate")
        previous = data.get("previous_version")
        return cls(
            workflow_id=str(data["workflow_id"]),
            version=int(data["version"]),
            previous_version=None if previous is None else int(previous),
            promoted_by=str(data["promoted_by"]),
            promoted_at=datetime.fromisoformat(str(data["promoted_at"])),
            gate=None if gate is None else Gate.from_dict(gate),
            forced=bool(data.get("forced", False)),
        )


def read_gate(report: Any, *, source: str, workflow_id: str, version: int) -> Gate:
    """The gate result of a replay report (``langorch replay --out FILE``), checked to be about
    this workflow and version.

    Args:
        report: the report file's JSON.
        source: the file's name, for messages and the record.
        workflow_id: the workflow being promoted.
        version: the version being promoted.

    Returns:
        The gate's summary: runs replayed, failing runs, verdict and what it failed on.

    Raises:
        InputValidationError: the file is not a replay report, or it replayed another
            workflow or version (the problem names the field, what it holds and how to fix it).
    """
    hint = f"write it with `langorch replay --workflow {workflow_id} --candidate-version "
    hint += f"{version} --out {source}`"
    problems: list[Problem] = []
    if not isinstance(report, dict):
        raise InputValidationError(
            f"gate {source}", [Problem("", "is not a replay report (a JSON object)", hint)]
        )
    if report.get("workflow") != workflow_id:
        problems.append(
            Problem(
                "workflow",
                f"the report replayed workflow {report.get('workflow')!r}, not {workflow_id!r}",
                hint,
            )
        )
    if report.get("candidate_version") != version:
        problems.append(
            Problem(
                "candidate_version",
                f"the report replayed version {report.get('candidate_version')!r}, not {version}",
                hint,
            )
        )
    summary = report.get("summary")
    failures = report.get("failures")
    passed = report.get("passed")
    if not isinstance(summary, dict) or not isinstance(summary.get("runs"), int):
        problems.append(Problem("summary.runs", "is missing or not a number", hint))
    if not isinstance(failures, dict):
        problems.append(Problem("failures", "is missing or not an object of run ids", hint))
    if not isinstance(passed, bool):
        problems.append(Problem("passed", "is missing or not true/false", hint))
    if problems:
        raise InputValidationError(f"gate {source}", problems)
    assert isinstance(summary, dict) and isinstance(failures, dict)  # checked above
    return Gate(
        source=source,
        runs=int(summary["runs"]),
        failures=len(failures),
        passed=bool(passed),
        fail_on=_fail_on(report.get("fail_on")),
    )


def _fail_on(value: Any) -> tuple[str, ...]:
    """The report's ``fail_on`` as the words ``--fail-on`` takes (``cost+20%``)."""
    if not isinstance(value, dict):
        return ()
    kinds = [str(k) for k in value.get("kinds", [])]
    rise = value.get("cost_rise")
    if isinstance(rise, int | float) and not isinstance(rise, bool):
        kinds.append(f"cost+{rise * 100:g}%")
    return tuple(kinds)
