"""Printing results: human text or ``--json`` on stdout, reasons on stderr."""

from __future__ import annotations

import json
import shutil
import sys
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from typing import Any, TextIO


class Output:
    """Where a command's results and messages go.

    Streams are looked up when used, not when built, so pytest's ``capsys`` sees them.

    Args:
        json_mode: print machine-readable JSON instead of text.
        stdout: results (default: ``sys.stdout`` at the time of printing).
        stderr: warnings and errors (default: ``sys.stderr`` at the time of printing).
    """

    def __init__(
        self, *, json_mode: bool, stdout: TextIO | None = None, stderr: TextIO | None = None
    ) -> None:
        self.json_mode = json_mode
        self._stdout = stdout
        self._stderr = stderr

    @property
    def stdout(self) -> TextIO:
        """The results stream."""
        return self._stdout or sys.stdout

    @property
    def stderr(self) -> TextIO:
        """The messages stream."""
        return self._stderr or sys.stderr

    def result(self, data: Any, text: str | Callable[[], str]) -> None:
        """Print a command's result: ``data`` as JSON, or ``text`` for people.

        Args:
            data: JSON-serialisable (datetimes become ISO strings).
            text: the human rendering, or a function producing it (only called in text mode).
        """
        if self.json_mode:
            print(to_json(data), file=self.stdout, flush=True)
        else:
            rendered = text() if callable(text) else text
            if rendered:
                # Flushed: a long-running command (``langorch dev``) piped to a file or another
                # program shows its result now, not when it exits.
                print(rendered, file=self.stdout, flush=True)

    def warn(self, message: str) -> None:
        """A one-line warning on stderr (never mixed into ``--json`` output)."""
        print(f"warning: {message}", file=self.stderr)

    def error(self, message: str) -> None:
        """A one-line error reason on stderr."""
        print(f"error: {message}", file=self.stderr)


def to_json(data: Any) -> str:
    """Stable, indented JSON for ``--json`` output."""
    return json.dumps(data, indent=2, sort_keys=True, ensure_ascii=False, default=_default)


def to_yaml(data: Any) -> str:
    """Block-style YAML in the order of ``data`` (definitions read like they are written)."""
    import yaml  # only the commands that print YAML pay for it

    return yaml.safe_dump(data, sort_keys=False, allow_unicode=True, default_flow_style=False)


def terminal_width() -> int:
    """The width to fit text tables to: ``COLUMNS``, else the terminal's, else 100."""
    return shutil.get_terminal_size((100, 24)).columns


_MIN_SHRUNK = 6
"""A shrunk column keeps at least this many characters (its header is clipped too)."""


def table(
    rows: Sequence[Mapping[str, Any]],
    columns: Sequence[tuple[str, str]],
    *,
    max_width: int | None = None,
    shrink: Sequence[str] = (),
) -> str:
    """A plain-text table.

    Args:
        rows: one mapping per row.
        columns: ``(key, header)`` pairs, in order.
        max_width: fit the lines to this many characters by narrowing the ``shrink`` columns
            (widest first) and ending their clipped cells with ``…``; ``None``: no limit.
        shrink: the keys of the columns that may be narrowed (ids stay whole: they are typed
            back into other commands).

    Returns:
        The table, or ``"(none)"`` when there are no rows.
    """
    if not rows:
        return "(none)"
    cells = [[header for _, header in columns]]
    cells += [[_cell(row.get(key)) for key, _ in columns] for row in rows]
    widths = [max(len(line[i]) for line in cells) for i in range(len(columns))]
    if max_width is not None:
        widths = _fit(widths, columns, max_width, shrink)
    return "\n".join(
        "  ".join(
            _clip(value, width).ljust(width) for value, width in zip(line, widths, strict=True)
        ).rstrip()
        for line in cells
    )


def _fit(
    widths: list[int], columns: Sequence[tuple[str, str]], max_width: int, shrink: Sequence[str]
) -> list[int]:
    fitted = list(widths)
    floors = {i: _MIN_SHRUNK for i, (key, _) in enumerate(columns) if key in shrink}
    excess = sum(fitted) + 2 * (len(fitted) - 1) - max_width
    while excess > 0:
        narrowable = [i for i, floor in floors.items() if fitted[i] > floor]
        if not narrowable:
            break  # as narrow as it goes: the terminal wraps the rest
        widest = max(narrowable, key=lambda i: fitted[i])
        fitted[widest] -= 1
        excess -= 1
    return fitted


def _clip(value: str, width: int) -> str:
    return value if len(value) <= width else value[: width - 1] + "…"


def _cell(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, list | tuple):
        return ",".join(str(v) for v in value) or "-"
    return str(value)


def _default(value: Any) -> Any:
    if isinstance(value, datetime):
        return value.isoformat()
    raise TypeError(f"not JSON serialisable: {type(value).__name__}")
