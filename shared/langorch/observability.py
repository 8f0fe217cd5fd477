"""Logs, metrics and traces for the Lambda handlers (Powertools), in one place.

Every log line is JSON with ``service``, and — through context-local keys in the handlers
(``thread_safe_append_keys``: local mode runs many invocations in one process, one per thread) and
``extra=`` in the library — ``run_id``, ``workflow_id``, ``workflow_version``, ``step_id`` and
``segment``. The library's own loggers (``langorch.*``) are routed through the same formatter.
Metrics are CloudWatch EMF in the ``langorch`` namespace.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from functools import lru_cache
from typing import Any, TypeVar

F = TypeVar("F", bound=Callable[..., Any])

SERVICE = "langorch"
NAMESPACE = "langorch"


@lru_cache(maxsize=1)
def logger() -> Any:
    """The process's Powertools ``Logger``; ``langorch.*`` loggers share its JSON formatter."""
    from aws_lambda_powertools import Logger
    from aws_lambda_powertools.logging.utils import copy_config_to_registered_loggers

    log = Logger(service=SERVICE)
    copy_config_to_registered_loggers(source_logger=log, include={"langorch"})
    return log


@lru_cache(maxsize=1)
def metrics() -> Any:
    """The process's Powertools ``Metrics`` (EMF).

    An invocation with nothing to count (a page visit that changed nothing, a redelivered
    approval request) is normal here: Powertools' warning about it is silenced as its docs
    advise, else every such invocation writes a Python warning to stderr (the terminal of
    ``langorch dev``, a stray non-JSON line in CloudWatch).
    """
    import warnings

    from aws_lambda_powertools import Metrics

    warnings.filterwarnings("ignore", "No application metrics to publish*")
    return Metrics(namespace=NAMESPACE, service=SERVICE)


UNEXPECTED_ERRORS = "UnexpectedErrors"
"""Errors no retry is meant to absorb (dimensions ``service``, ``function``): what alarms watch.
Lambda's own ``Errors`` also counts the storage and lease errors the state machine retries on
purpose."""


def retried_on_purpose(exc: BaseException, retried: tuple[type[BaseException], ...]) -> bool:
    """Whether the state machine's ``Retry`` absorbs ``exc``: its class is one of ``retried``.

    Step Functions matches the error *name* Lambda reports (the exception's class name), so a
    subclass (``RecordTooLargeError`` of ``StorageError``) is not retried and is unexpected.
    """
    return type(exc) in retried


def unexpected_error(function: str) -> None:
    """Count one unexpected error of ``function`` (flushed at once: the invocation is failing).

    Args:
        function: the function's short name (``run-segment``, ``request-approval``).
    """
    from aws_lambda_powertools import single_metric
    from aws_lambda_powertools.metrics import MetricUnit

    with single_metric(
        name=UNEXPECTED_ERRORS, unit=MetricUnit.Count, value=1, namespace=NAMESPACE
    ) as metric:
        metric.add_dimension("service", SERVICE)
        metric.add_dimension("function", function)


def tracing_enabled() -> bool:
    """Whether Powertools' ``Tracer`` would trace in this process.

    Powertools' own rule (``Tracer._is_tracer_disabled``), read here without constructing a
    ``Tracer``, which imports the X-Ray SDK even when disabled: off when
    ``POWERTOOLS_TRACE_DISABLED`` is truthy, outside Lambda (no ``LAMBDA_TASK_ROOT``), and under
    SAM local or Chalice. A unit test holds this to Powertools' private method, so an upgrade
    that changes the rule fails loudly.
    """
    from aws_lambda_powertools.shared import constants
    from aws_lambda_powertools.shared.functions import resolve_truthy_env_var_choice

    if resolve_truthy_env_var_choice(env=os.getenv(constants.TRACER_DISABLED_ENV, "false")):
        return False
    in_lambda = bool(os.getenv(constants.LAMBDA_TASK_ROOT_ENV))
    emulated = bool(os.getenv(constants.SAM_LOCAL_ENV) or os.getenv(constants.CHALICE_LOCAL_ENV))
    return in_lambda and not emulated


class NoTracer:
    """Stands in for Powertools' ``Tracer`` when tracing is off: decorators return the function.

    The X-Ray SDK cost about a seventh of the runner handler's cold import (PERFORMANCE P3); a
    process that does not trace never loads it.
    """

    disabled = True

    def capture_lambda_handler(self, lambda_handler: F | None = None, **_options: Any) -> Any:
        """The handler itself (used bare or with ``Tracer``'s options)."""
        if lambda_handler is not None:
            return lambda_handler
        return lambda handler: handler

    def capture_method(self, method: F | None = None, **_options: Any) -> Any:
        """The method itself (used bare or with ``Tracer``'s options)."""
        if method is not None:
            return method
        return lambda function: function

    def put_annotation(self, key: str, value: Any) -> None:
        """Nothing: there is no segment to annotate."""

    def put_metadata(self, key: str, value: Any, namespace: str = "default") -> None:
        """Nothing: there is no segment to annotate."""


@lru_cache(maxsize=1)
def tracer() -> Any:
    """The process's Powertools ``Tracer`` (X-Ray) when tracing is on, else a :class:`NoTracer`.

    In Lambda the functions have active tracing, so the runner traces there; outside Lambda, or
    with ``POWERTOOLS_TRACE_DISABLED=true``, the X-Ray SDK is not imported at all.
    """
    if not tracing_enabled():
        return NoTracer()
    from aws_lambda_powertools import Tracer

    return Tracer(service=SERVICE)
