"""`langorch dev`'s functions log as Lambda's do: one stream per sandbox, a REPORT line per
invocation (moved out of ``test_dev_pipeline``, whose stack is shared by its tests: there the
examples' bucket and earlier tests also invoke the trigger, and counting needs a quiet stack)."""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from langorch.local.lambdas import DEFAULT_SANDBOXES, FUNCTIONS
from langorch.local.stack import LocalStack
from tests.support.stacks import running_stack


@pytest.fixture
def stack(tmp_path: Path) -> Iterator[LocalStack]:
    """A stack without examples: nothing but the test invokes its functions."""
    with running_stack(tmp_path / ".langorch") as running:
        yield running


def test_a_burst_of_invocations_logs_to_one_stream_per_sandbox(stack: LocalStack):
    # Given the trigger function, invoked 100 times, 16 at a time
    function = FUNCTIONS["trigger"]
    invoke = stack.invoker(function)
    with ThreadPoolExecutor(max_workers=16) as pool:
        answers = list(pool.map(lambda _: invoke({}), range(100)))
    assert len(answers) == 100

    # When the stack has shipped what the returned invocations logged
    assert stack.flush_logs()

    # Then each invocation's REPORT line is in the local log store, in the streams of at most
    # as many sandboxes as the function has
    group = f"{stack.settings.log_group_prefix}{function}"
    with stack.container.db.read() as connection:
        reports = connection.execute(
            "SELECT stream FROM log_lines WHERE log_group = ? AND message LIKE 'REPORT RequestId%'",
            (group,),
        ).fetchall()
    assert len(reports) == 100
    assert 1 <= len({stream for (stream,) in reports}) <= DEFAULT_SANDBOXES
