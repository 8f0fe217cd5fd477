"""Tracing on or off: langorch's rule is Powertools' rule, without importing the X-Ray SDK."""

from __future__ import annotations

import pytest
from aws_lambda_powertools.tracing.tracer import Tracer

from langorch.observability import NoTracer, tracing_enabled

ENVIRONMENTS = [
    {},
    {"LAMBDA_TASK_ROOT": "/var/task"},
    {"LAMBDA_TASK_ROOT": "/var/task", "POWERTOOLS_TRACE_DISABLED": "true"},
    {"LAMBDA_TASK_ROOT": "/var/task", "POWERTOOLS_TRACE_DISABLED": "1"},
    {"LAMBDA_TASK_ROOT": "/var/task", "POWERTOOLS_TRACE_DISABLED": "false"},
    {"LAMBDA_TASK_ROOT": "/var/task", "AWS_SAM_LOCAL": "true"},
    {"LAMBDA_TASK_ROOT": "/var/task", "AWS_CHALICE_CLI_MODE": "true"},
    {"POWERTOOLS_TRACE_DISABLED": "false"},
]
VARIABLES = {name for env in ENVIRONMENTS for name in env}


@pytest.mark.parametrize("env", ENVIRONMENTS, ids=lambda env: ",".join(env) or "none")
def test_tracing_is_on_exactly_when_powertools_would_trace(
    env: dict[str, str], monkeypatch: pytest.MonkeyPatch
):
    # Given an environment
    for name in VARIABLES:
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)

    # When langorch and Powertools decide whether to trace
    ours = tracing_enabled()
    theirs = not Tracer._is_tracer_disabled()

    # Then they agree (a Powertools upgrade that changes its rule fails here)
    assert ours == theirs


def test_the_stand_in_tracer_leaves_decorated_functions_as_they_are():
    # Given the stand-in used when tracing is off
    tracer = NoTracer()

    def handler(event: dict[str, int], context: object) -> dict[str, int]:
        return {"n": event["n"] + 1}

    # When a handler and a method are decorated, with and without options
    decorated = [
        tracer.capture_lambda_handler(handler),
        tracer.capture_lambda_handler(capture_response=False)(handler),
        tracer.capture_method(handler),
        tracer.capture_method(capture_response=False)(handler),
    ]

    # Then each is the function itself and still answers
    assert all(function is handler for function in decorated)
    assert decorated[1]({"n": 1}, None) == {"n": 2}
    tracer.put_annotation("run_id", "run-1")
    tracer.put_metadata("steps", 3)


def test_only_the_exact_errors_the_state_machine_retries_are_expected():
    from langorch.domain.errors import LeaseHeldError, RecordTooLargeError, StorageError
    from langorch.observability import retried_on_purpose

    retried = (StorageError, LeaseHeldError)

    # Step Functions matches the reported class name, not the class hierarchy: a subclass of
    # a retried error is not retried, so it must count as unexpected (and alarm)
    assert retried_on_purpose(StorageError("x"), retried)
    assert retried_on_purpose(LeaseHeldError("x"), retried)
    assert not retried_on_purpose(RecordTooLargeError("x"), retried)
    assert not retried_on_purpose(ValueError("x"), retried)


def test_an_invocation_with_nothing_to_count_writes_no_warning():
    # Given the handlers' metrics as a sandbox builds them (once per process: pytest resets
    # warning filters between tests, so this test builds them afresh), and an invocation that
    # counts nothing (a page visit, a redelivered approval request)
    import warnings

    from langorch.observability import metrics

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("default")
        metrics.cache_clear()
        counted = metrics()

        @counted.log_metrics
        def handler(event: dict[str, str], context: object) -> str:
            return "ok"

        # When it ends (Powertools flushes its metrics)
        assert handler({}, None) == "ok"
    # Then no Python warning is written (in `langorch dev` it reached the terminal)
    assert [str(w.message) for w in caught] == []
