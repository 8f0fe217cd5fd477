"""Logs, metrics and traces for the Lambda handlers (Powertools), in one place.

Every log line is JSON with ``service``, and — through context-local keys in the handlers
(``thread_safe_append_keys``: local mode runs many invocations in one process, one per thread) and
``extra=`` in the library — ``run_id``, ``workflow_id``, ``workflow_version``, ``step_id`` and
``segment``. The library's own loggers (``langorch.*``) are routed through the same formatter.
Metrics are CloudWatch EMF in the ``langorch`` namespace.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

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
    """The process's Powertools ``Metrics`` (EMF)."""
    from aws_lambda_powertools import Metrics

    return Metrics(namespace=NAMESPACE, service=SERVICE)


UNEXPECTED_ERRORS = "UnexpectedErrors"
"""Errors no retry is meant to absorb (dimensions ``service``, ``function``): what alarms watch.
Lambda's own ``Errors`` also counts the storage and lease errors the state machine retries on
purpose."""


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


@lru_cache(maxsize=1)
def tracer() -> Any:
    """The process's Powertools ``Tracer`` (X-Ray; disabled outside Lambda)."""
    from aws_lambda_powertools import Tracer

    return Tracer(service=SERVICE)
