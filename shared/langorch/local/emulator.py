"""Fixes to the AWS emulator (moto) so local mode keeps the promises the cloud keeps."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

_WRITES = ("put_item", "update_item", "delete_item", "transact_write_items", "batch_write_item")
"""Every DynamoDB write path: a BatchWriteItem outside the lock once raced a TransactWriteItems
(moto copies whole tables while it applies one) and answered 500."""


def serialise_dynamodb_writes() -> Callable[[], None]:
    """Make moto apply each DynamoDB write atomically, as DynamoDB does.

    moto checks a write's condition and applies it as separate steps with no lock between
    them, so two threads can both pass ``attribute_not_exists(...)`` and both win (measured:
    two winners, sometimes with the same fence). DynamoDB serialises writes to an item; this
    restores that in the emulator only — our code is untouched, so code that read-then-wrote
    would still let both threads win.

    Returns:
        A function that undoes the change.
    """
    from moto.dynamodb.responses import DynamoHandler

    lock = threading.RLock()
    originals = {name: getattr(DynamoHandler, name) for name in _WRITES}
    for name, original in originals.items():

        def atomic(self: Any, _original: Any = original) -> Any:
            with lock:
                return _original(self)

        setattr(DynamoHandler, name, atomic)

    def undo() -> None:
        for name, original in originals.items():
            setattr(DynamoHandler, name, original)

    return undo


def retry_interpreter_lambda_calls() -> Callable[[], None]:
    """Let moto's state-machine interpreter retry its Lambda calls like an SDK client.

    moto builds that client with retries off, so a single dropped loopback connection under
    load fails the task with ``States.Runtime`` — a brittleness AWS's own Lambda integration
    does not have. Our handlers are idempotent (leases, dedupe keys), as Lambda's at-least-once
    delivery requires anyway, so a retried invoke is safe.

    Returns:
        A function that undoes the change.
    """
    from importlib import import_module

    import boto3
    from botocore.config import Config

    module: Any = import_module(
        "moto.stepfunctions.parser.asl.component.state.exec.state_task.lambda_eval_utils"
    )
    original = module.boto_client_for

    def patient(region: str, service: str, state_credentials: Any = None) -> Any:
        client: Any = original(region=region, service=service, state_credentials=state_credentials)
        return boto3.client(
            service,  # type: ignore[call-overload]
            region_name=region,
            endpoint_url=client.meta.endpoint_url,
            aws_access_key_id="ak",
            aws_secret_access_key="sk",  # noqa: S106 - the emulator's, not a secret
            config=Config(
                parameter_validation=False,
                retries={"mode": "standard", "max_attempts": 4},
                connect_timeout=client.meta.config.connect_timeout,
                read_timeout=client.meta.config.read_timeout,
            ),
        )

    module.boto_client_for = patient

    def undo() -> None:
        module.boto_client_for = original

    return undo


def lazy_batch_package() -> None:
    """Let moto's Step Functions interpreter load without moto's whole EC2 backend.

    The interpreter imports ``moto.batch.utils`` for one enum (``JobStatus``); importing it runs
    ``moto/batch/__init__.py``, which imports the Batch backend and with it all of EC2 — about
    80 % of the interpreter's import time (measured with ``-X importtime``: 5.9 of 6.9 s under
    load), on the way to "ready". The package is registered here without running its
    ``__init__``, so ``moto.batch.utils`` loads alone; the package's one name
    (``batch_backends``) still resolves, on first use, through a module ``__getattr__``
    (PEP 562). Nothing local calls Batch, and a call that did would still work.
    """
    import importlib
    import importlib.util
    import sys

    if "moto.batch" in sys.modules:
        return
    spec = importlib.util.find_spec("moto.batch")
    if spec is None or spec.submodule_search_locations is None:
        return
    package = importlib.util.module_from_spec(spec)  # created, not executed

    def __getattr__(name: str) -> Any:
        return getattr(importlib.import_module("moto.batch.models"), name)

    package.__getattr__ = __getattr__  # type: ignore[method-assign]
    sys.modules["moto.batch"] = package
