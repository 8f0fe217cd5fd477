"""A pytest plugin that writes how much CPU each test file took (``make test-cpu``).

``pytest -p tests.support.cpu_report`` records, per test file, the CPU seconds its tests spent in
the worker process (``time.process_time``) and in the children the worker waited for
(``RUSAGE_CHILDREN``: subprocesses, a stack's fork server once stopped), and writes one JSON
line per worker to ``$LANGORCH_CPU_REPORT`` (default ``.pytest_cache/cpu-report.jsonl``).
It measures, it never fails a test: the suite's CPU budget (PERFORMANCE P8) is read off the
report, not asserted.

``LANGORCH_CPU_REPORT_BY=test`` keys the report by test id instead of by file, to find which
tests of a heavy file spend its CPU.
"""

from __future__ import annotations

import json
import os
import resource
import time
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

_spent: dict[str, float] = defaultdict(float)


def _now() -> float:
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return time.process_time() + children.ru_utime + children.ru_stime


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: Any) -> Iterator[None]:
    started = _now()
    yield
    by_test = os.environ.get("LANGORCH_CPU_REPORT_BY") == "test"
    _spent[item.nodeid if by_test else item.nodeid.split("::", 1)[0]] += _now() - started


def pytest_sessionfinish(session: pytest.Session) -> None:
    path = Path(os.environ.get("LANGORCH_CPU_REPORT", ".pytest_cache/cpu-report.jsonl"))
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a", encoding="utf-8") as report:
        report.write(json.dumps({"pid": os.getpid(), "files": dict(_spent)}) + "\n")
