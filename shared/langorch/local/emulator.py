"""Fixes to the AWS emulator (moto) so local mode keeps the promises the cloud keeps."""

from __future__ import annotations

import functools
import logging
import re
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from langorch.local._patching import replace_in

_WRITES = ("put_item", "update_item", "delete_item", "transact_write_items", "batch_write_item")
"""Every DynamoDB write path: a BatchWriteItem outside the lock once raced a TransactWriteItems
(moto copies whole tables while it applies one) and answered 500."""


_READS = ("get_item", "query", "scan", "batch_get_item", "transact_get_items")
"""Every DynamoDB read path: a read that walks an item while a write changes it fails inside moto
("dictionary changed size during iteration"), where DynamoDB would answer."""


def local_dynamodb() -> Callable[[], None]:
    """moto's DynamoDB as the local stack runs it: atomic writes, reads that never see a write
    half done, transactions that back up only their items, Queries that read only their
    partition (``langorch.local.indexed_query``) and items answered as the JSON they are.

    Returns:
        A function that undoes all of it.
    """
    from langorch.local.dynamodb_lean import (
        copy_updated_items_only_for_streams,
        parse_update_conditions_once,
    )
    from langorch.local.indexed_query import indexed_queries

    undos = [
        serialise_dynamodb_writes(),
        narrow_transaction_backups(),
        copy_updated_items_only_for_streams(),
        parse_update_conditions_once(),
        indexed_queries(),
        plain_item_answers(),
    ]

    def undo() -> None:
        for each in reversed(undos):
            each()

    return undo


_ITEM_ANSWERS = frozenset(
    {"GetItem", "Query", "Scan", "BatchGetItem", "TransactGetItems"}
    | {"PutItem", "UpdateItem", "DeleteItem"}
)
"""DynamoDB operations whose answer is items (or an item's attributes) and counts."""


def plain_item_answers() -> Callable[[], None]:
    """Write the answers that carry items as the JSON they already are.

    moto builds a DynamoDB answer as a dict of items in DynamoDB's own JSON and then walks it,
    value by value, through a serializer driven by the service model: ~85 ms for a page of 50
    run records, 90 % of the console's runs page over 10,000 runs. For these operations the
    walk changes nothing but binary values (bytes -> base64), so the dict is dumped directly,
    bytes encoded as the serializer encodes them; an answer holding anything else (a
    timestamp) still goes through moto's serializer. ``tests/integration/
    test_plain_item_answers.py`` checks both write the same answers.

    Returns:
        A function that undoes the change.
    """
    import base64
    import json

    from moto.dynamodb.responses import DynamoResult

    original = DynamoResult.execute_result

    def encode(value: Any) -> str:
        if isinstance(value, bytes | bytearray):
            return base64.b64encode(value).decode("ascii")
        raise TypeError(type(value).__name__)

    def execute_result(self: Any, context: Any) -> Any:
        if context.operation_model.name in _ITEM_ANSWERS:
            try:
                body = json.dumps(self.result, default=encode)
            except (TypeError, ValueError):
                return original(self, context)
            return 200, {"Content-Type": "application/x-amz-json-1.0"}, body
        return original(self, context)

    DynamoResult.execute_result = execute_result  # type: ignore[method-assign]

    def undo() -> None:
        DynamoResult.execute_result = original  # type: ignore[method-assign]

    return undo


def serialise_dynamodb_writes() -> Callable[[], None]:
    """Make moto apply each DynamoDB write atomically, as DynamoDB does, and never read an item
    while a write changes it.

    moto checks a write's condition and applies it as separate steps with no lock between
    them, so two threads can both pass ``attribute_not_exists(...)`` and both win (measured:
    two winners, sometimes with the same fence). DynamoDB serialises writes to an item; this
    restores that in the emulator only — our code is untouched, so code that read-then-wrote
    would still let both threads win. Reads share the lock (many at once, none during a write),
    so 30 voters reading and writing at once no longer crash moto's item walk.

    Returns:
        A function that undoes the change.
    """
    from moto.dynamodb.responses import DynamoHandler

    lock = _ReadWriteLock()
    originals = {name: getattr(DynamoHandler, name) for name in (*_WRITES, *_READS)}
    for name, original in originals.items():
        guard = lock.writing if name in _WRITES else lock.reading

        def guarded(self: Any, _original: Any = original, _guard: Any = guard) -> Any:
            with _guard():
                return _original(self)

        setattr(DynamoHandler, name, guarded)

    def undo() -> None:
        for name, original in originals.items():
            setattr(DynamoHandler, name, original)

    return undo


class _ReadWriteLock:
    """Many readers or one (re-entrant) writer; a waiting writer goes before new readers.

    The standard library has no readers-writer lock; this one is only the emulator's.
    """

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._readers = 0
        self._writer: int | None = None
        self._depth = 0
        self._waiting_writers = 0

    @contextmanager
    def reading(self) -> Iterator[None]:
        me = threading.get_ident()
        with self._cond:
            inside_own_write = self._writer == me
            if not inside_own_write:
                while self._writer is not None or self._waiting_writers:
                    self._cond.wait()
                self._readers += 1
        try:
            yield
        finally:
            if not inside_own_write:
                with self._cond:
                    self._readers -= 1
                    if not self._readers:
                        self._cond.notify_all()

    @contextmanager
    def writing(self) -> Iterator[None]:
        me = threading.get_ident()
        with self._cond:
            if self._writer == me:
                self._depth += 1
            else:
                self._waiting_writers += 1
                while self._writer is not None or self._readers:
                    self._cond.wait()
                self._waiting_writers -= 1
                self._writer, self._depth = me, 1
        try:
            yield
        finally:
            with self._cond:
                self._depth -= 1
                if not self._depth:
                    self._writer = None
                    self._cond.notify_all()


LISTEN_BACKLOG = 1024
"""Connections the kernel queues for a local server before refusing: a burst of 100 clicks,
each fanning out into several AWS calls, overflowed werkzeug's 128 (1-3 s retransmit stalls)."""


def wide_listen_backlog() -> Callable[[], None]:
    """Give the werkzeug servers started from now on (the emulator's) a burst-sized backlog.

    Returns:
        A function that undoes the change.
    """
    from werkzeug.serving import BaseWSGIServer

    original = BaseWSGIServer.request_queue_size
    BaseWSGIServer.request_queue_size = LISTEN_BACKLOG

    def undo() -> None:
        BaseWSGIServer.request_queue_size = original

    return undo


def keep_alive_handler() -> type:
    """moto's request handler for werkzeug's server, answering on kept-alive connections.

    werkzeug's development server closes every connection after one response (``http.server``
    cannot skip a request body the application left unread) and then waits 10 ms for stray
    body bytes to discard. So every AWS call of every sandbox opened a TCP connection, the
    emulator started a thread for it, and each answer came 10 ms late: 200 calls left 200
    sockets in TIME-WAIT, and starting threads and waiting were ~20 % of the DynamoDB process's
    busy time. This handler keeps werkzeug's and moto's request parsing (``make_environ``) and
    replaces only the answering (``run_wsgi``): the body is read whole before the application
    runs, so nothing is ever left unread; the answer goes out in one write with its length;
    the connection stays open for the client's next call, as AWS's endpoints keep it. A
    chunked request body still closes its connection, as before. Not a new server library:
    a bounded worker pool (waitress's) could deadlock the emulator, whose Lambda invokes call
    back into it while they wait.

    Returns:
        The handler class to pass to ``werkzeug.serving.make_server``.
    """
    import io

    from moto.moto_server.werkzeug_app import MotoRequestHandler

    class KeepAliveRequestHandler(MotoRequestHandler):
        def make_environ(self) -> dict[str, Any]:
            environ: dict[str, Any] = super().make_environ()
            if environ.get("wsgi.input_terminated"):
                self.close_connection = True  # chunked: no length to read up to
            else:
                length = int(environ.get("CONTENT_LENGTH") or 0)
                environ["wsgi.input"] = io.BytesIO(self.rfile.read(length) if length > 0 else b"")
            return environ

        def run_wsgi(self) -> None:
            environ = self.make_environ()
            status, headers, body = wsgi_answer(self.server.app, environ)  # type: ignore[attr-defined]
            self.wfile.write(_response(status, headers, body, self.command, self.close_connection))

        def log_request(self, code: int | str = "-", size: int | str = "-") -> None:
            pass  # one line per AWS call is noise (werkzeug's access log was silenced too)

    return KeepAliveRequestHandler


def wsgi_answer(app: Any, environ: dict[str, Any]) -> tuple[str, list[tuple[str, str]], bytes]:
    """Run a WSGI application; its status, headers and whole body (500 if it raised)."""
    started: list[Any] = []
    chunks: list[bytes] = []

    def start_response(status: str, headers: list[tuple[str, str]], exc_info: Any = None) -> Any:
        started[:] = [status, headers]
        return chunks.append

    try:
        result = app(environ, start_response)
        try:
            chunks.extend(result)
        finally:
            close = getattr(result, "close", None)
            if close is not None:
                close()
    except Exception:
        logging.getLogger(__name__).exception("the emulator failed to answer a request")
        return "500 INTERNAL SERVER ERROR", [("Content-Type", "text/plain")], b"emulator error"
    return started[0], started[1], b"".join(chunks)


def _response(
    status: str, headers: list[tuple[str, str]], body: bytes, method: str, close: bool
) -> bytes:
    """The bytes of an HTTP/1.1 answer: status line, headers with the length, body."""
    bodiless = method == "HEAD" or status.startswith(("1", "204", "304"))
    lines = [f"HTTP/1.1 {status}"]
    length = None
    for name, value in headers:
        lowered = name.lower()
        if lowered in ("connection", "transfer-encoding", "keep-alive"):
            continue
        if lowered == "content-length":
            length = value  # a HEAD answer states the length of what a GET would send
            continue
        lines.append(f"{name}: {value}")
    if not status.startswith(("1", "204", "304")):
        lines.append(f"Content-Length: {length if bodiless and length else len(body)}")
    if close:
        lines.append("Connection: close")
    head = ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")
    return head if bodiless else head + body


_PER_EXECUTION_STATE = re.compile(r'"Type"\s*:\s*"(Map|Parallel)"')
"""State types whose parsed components keep per-execution job pools in moto's interpreter."""


def parse_each_definition_once() -> Callable[[], None]:
    """Let moto's Step Functions interpreter parse a state machine's definition once.

    moto parses the definition (an ANTLR grammar, run in Python) again for every execution:
    about 10 % of the emulator's busy time with 100 runs starting at once, queued ahead of their
    first steps. The parsed program keeps no execution's state (each execution's lives in its
    own ``Environment``), so one parse serves every execution of a definition. A definition
    with Map or Parallel states, whose components hold job pools, is still parsed per
    execution (the run state machine has neither).

    Returns:
        A function that undoes the change.
    """
    from moto.stepfunctions.parser.asl.parse.asl_parser import AmazonStateLanguageParser
    from moto.stepfunctions.parser.backend.execution_worker import ExecutionWorker

    original = ExecutionWorker._get_evaluation_entrypoint
    parsed: dict[str, Any] = {}
    lock = threading.Lock()

    def entrypoint(self: Any) -> Any:
        definition = self._evaluation_details.state_machine_details.definition
        if _PER_EXECUTION_STATE.search(definition):
            return original(self)
        with lock:  # 100 executions starting at once parse it once, not 100 times
            if definition not in parsed:
                parsed[definition] = AmazonStateLanguageParser.parse(definition)[0]
            return parsed[definition]

    ExecutionWorker._get_evaluation_entrypoint = entrypoint  # type: ignore[method-assign]

    def undo() -> None:
        ExecutionWorker._get_evaluation_entrypoint = original  # type: ignore[method-assign]

    return undo


def stop_ends_task_waits() -> Callable[[], None]:
    """Let ``StopExecution`` end an execution that waits on a task token, as Step Functions does.

    moto marks the execution's program stopped but leaves its ``waitForTaskToken`` wait
    pending: the execution still reads ``RUNNING`` (until the task's timeout, up to a year), and
    a ``SendTaskSuccess`` to its token is accepted, wakes the wait and resumes nothing. An
    approver was told "You approved" while the decision went nowhere (issue 35). Step Functions
    ends the execution ``ABORTED`` at once and refuses its tokens: here the stop wakes every
    wait of the execution (so moto ends it ``ABORTED``) and marks each token's consumer gone,
    so a later ``SendTaskSuccess`` is refused (``TaskDoesNotExist``).

    Returns:
        A function that undoes the change.
    """
    from moto.stepfunctions.parser.asl.eval.callback.callback import (
        CallbackConsumerLeft,
        CallbackOutcomeSuccess,
    )
    from moto.stepfunctions.parser.backend.execution import Execution

    original = Execution.stop

    def stop(self: Any, stop_date: Any, error: str | None, cause: str | None) -> None:
        original(self, stop_date, error, cause)
        worker = self.exec_worker
        if worker is None:
            return
        for token, endpoint in list(worker.env.callback_pool_manager._pool.items()):
            endpoint.report(CallbackConsumerLeft())
            # Wakes the wait only: the stopped program takes no further state (a failure
            # outcome would be caught, or turn the execution FAILED instead of ABORTED).
            endpoint.notify(CallbackOutcomeSuccess(token, "{}"))

    Execution.stop = stop  # type: ignore[method-assign]

    def undo() -> None:
        Execution.stop = original  # type: ignore[method-assign]

    return undo


JSON_PATHS_KEPT = 1024
"""Parsed JSONPath expressions kept (the run state machine has about twenty)."""


def parse_each_json_path_once() -> Callable[[], None]:
    """Let moto's Step Functions interpreter parse each JSONPath expression once.

    moto parses a state's paths (``$.run_id``, ``$.status``, a ``ResultPath``) on every
    evaluation with ``jsonpath_ng``, which builds a new PLY parser each time (about 0.8 ms):
    a run evaluates some thirty of them, about a seventh of the emulator's CPU while 100
    approvals resume at once. A parsed path is an immutable tree (``find`` and
    ``update_or_create`` build new values and change only the data they are given), so one
    parse serves every evaluation, from any thread.

    Returns:
        A function that undoes the change.
    """
    return replace_in(
        [
            "moto.stepfunctions.parser.asl.utils.json_path",
            "moto.stepfunctions.parser.asl.component.common.path.result_path",
        ],
        "parse",
        lambda original: functools.lru_cache(maxsize=JSON_PATHS_KEPT)(original),
    )


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


def narrow_transaction_backups() -> Callable[[], None]:
    """Back up only the items a TransactWriteItems touches, not whole tables.

    moto deep-copies every table a transaction names before applying it, to roll back on a
    failed condition: the cost grows with the table (14 % of the emulator's CPU with 100 runs in
    flight, and more as the runs table grows). This keeps moto's transaction code and its
    rollback points, but makes its table copy free and restores the touched items from their
    own copies instead — the same outcome, since a transaction changes nothing else. When the
    items cannot be read up front (a malformed request), moto's own full copy is used.

    Returns:
        A function that undoes the change.
    """
    import copy as copy_module
    import types
    from importlib import import_module

    from moto.dynamodb.models import DynamoDBBackend
    from moto.dynamodb.models.table import Table

    narrowing = threading.local()
    real_deepcopy = copy_module.deepcopy

    def deepcopy(value: Any, memo: Any = None) -> Any:
        if isinstance(value, Table) and getattr(narrowing, "on", False):
            return value  # the touched items are backed up one by one instead
        return real_deepcopy(value, memo)

    shim = types.SimpleNamespace(**{**vars(copy_module), "deepcopy": deepcopy})
    # moto's models module uses ``copy.deepcopy`` for the table backups; it gets this shim.
    models: Any = import_module("moto.dynamodb.models")
    original_module_copy = models.copy
    original = DynamoDBBackend.transact_write_items

    def transact_write_items(self: Any, transact_items: list[dict[str, Any]]) -> None:
        try:
            backups = _item_backups(self, transact_items)
        except Exception:  # moto's own validation reports it; keep its full backup
            return original(self, transact_items)
        narrowing.on = True
        try:
            return original(self, transact_items)
        except Exception:
            _restore_items(backups)
            raise
        finally:
            narrowing.on = False

    models.copy = shim
    DynamoDBBackend.transact_write_items = transact_write_items  # type: ignore[method-assign]

    def undo() -> None:
        models.copy = original_module_copy
        DynamoDBBackend.transact_write_items = original  # type: ignore[method-assign]

    return undo


_Backup = tuple[Any, Any, Any, Any]
"""(table, hash key, range key or None, a copy of the item before, or None when absent)."""


def _item_backups(backend: Any, transact_items: list[dict[str, Any]]) -> list[_Backup]:
    import copy

    backups: list[_Backup] = []
    for entry in transact_items:
        _, op = next(iter(entry.items()))
        table = backend.get_table(op["TableName"])
        if "Item" in op:
            attrs = op["Item"]
            key = {table.hash_key_attr: attrs[table.hash_key_attr]}
            if table.range_key_attr is not None:
                key[table.range_key_attr] = attrs[table.range_key_attr]
        else:
            key = op["Key"]
        hash_key, range_key = backend.get_keys_value(table, key)
        before = table.get_item(hash_key, range_key)
        backups.append((table, hash_key, range_key, copy.deepcopy(before)))
    return backups


def _restore_items(backups: list[_Backup]) -> None:
    from langorch.local.indexed_query import touched

    # Newest first: an item named twice (moto refuses that, after applying) ends as it began.
    for table, hash_key, range_key, before in reversed(backups):
        touched(table, hash_key, range_key)
        if before is None:
            if range_key is not None:
                if hash_key in table.items:
                    table.items[hash_key].pop(range_key, None)
            else:
                table.items.pop(hash_key, None)
        elif range_key is not None:
            table.items[hash_key][range_key] = before
        else:
            table.items[hash_key] = before


def route_outside_the_lock(app: Any) -> Any:
    """Route each request to its service without holding moto's dispatcher lock.

    moto's ``DomainDispatcherApplication.get_application`` finds a request's service under one
    lock — and may read the request body from the socket inside it — so every emulator request
    queues behind every other one: ~63 % of the stack's busy samples with 100 runs in flight
    (sampled in the bench's process). Finding the service reads only the request, so it runs
    unlocked here; the lock is kept for what it protects, creating a service's app once.

    Args:
        app: moto's dispatcher application.

    Returns:
        The same application, routing unlocked.
    """
    from moto.moto_server.werkzeug_app import DEFAULT_SERVICE_REGION

    backends: dict[str | None, Any] = {}

    def backend_for(host: str | None) -> Any:
        # moto lists its own package folder (a directory read and ~150 stats) to match a host
        # on every request (18 % of the emulator's busy time under 100 runs); a host's backend
        # never changes, so each is matched once.
        if host not in backends:
            backends[host] = app.get_backend_for_host(host)
        return backends[host]

    def get_application(environ: dict[str, Any]) -> Any:
        path_info = environ.get("PATH_INFO", "")
        if isinstance(path_info, bytes):
            path_info = path_info.decode("utf-8")
        if path_info.startswith("/moto-api") or path_info == "/favicon.ico":
            host: str | None = "moto_api"
        elif path_info.startswith(("/latest/meta-data/", "/latest/api/")):
            host = "instance_metadata"
        else:
            host = None
        backend = backend_for(host)
        if not backend:
            host = app.infer_service_region_host(environ, path_info)
            if host is None:
                service, region = DEFAULT_SERVICE_REGION
                host = f"{service}.{region}.amazonaws.com"
            backend = backend_for(host)
        found = app.app_instances.get(backend)
        if found is not None:
            return found
        with app.lock:
            if backend not in app.app_instances:
                app.app_instances[backend] = app.create_app(backend)
            return app.app_instances[backend]

    app.get_application = get_application
    return app
