"""S3 object-created events in local mode: S3 → EventBridge → SQS → the trigger handler.

In the cloud, the drop bucket sends its events to EventBridge and a rule for ``aws.s3``
"Object Created" on that bucket invokes the trigger Lambda with the EventBridge envelope
(``version``, ``id``, ``detail-type``, ``source``, ``account``, ``time``, ``region``,
``resources``, ``detail.bucket.name``, ``detail.object.key/size/etag/version-id/sequencer``,
``detail.reason``). moto delivers EventBridge rules to SQS but not to Lambda targets, so local mode
builds the same bucket configuration and rule with an SQS queue as the rule's target, polls the
queue and hands each message body — the envelope, unchanged — to the trigger handler. A message is
deleted only after the handler returned, so a failure is redelivered after the visibility timeout
(at-least-once, like the cloud); after :data:`MAX_RECEIVES` receives it is dropped with an error.

What was checked against moto 5.2 in server mode (``ThreadedMotoServer``, in this process):

- S3 with ``EventBridgeConfiguration`` → an ``aws.s3`` rule → an SQS target does produce the
  events (``put_object`` sends them synchronously, before it returns); ``anything-but`` /
  ``prefix`` patterns are evaluated, so the rule leaves out the checkpoint offload prefix, which
  lives in the same bucket and must not start runs.
- moto's envelope has a **constant** ``detail.object.sequencer`` (``617f08299329d189``) and
  ``version-id`` ``null`` on an unversioned bucket. The trigger's dedupe key is bucket + key +
  version/sequencer, so with moto's constant every later upload of the same key would look like a
  duplicate of the first and start nothing. In S3 the sequencer grows with every event on a key
  and stays the same when the event is redelivered. While the poller runs it patches moto's
  EventBridge rule delivery to give each S3 event a fresh, growing sequencer (18 upper-case hex
  digits, like S3's) — set once per event, before it fans out to the rules, so every rule and
  every redelivery of that event carries the same value.
- moto's EventBridge envelope carries the object key as stored (``in/a b+c.csv``), while S3's
  carries it URL-encoded (``in/a+b%2Bc.csv``; moto's own S3 → SQS/Lambda notifications do encode
  it). The same patch encodes the key as S3 does, so the trigger's decoding is exercised locally
  exactly as in the cloud.
"""

from __future__ import annotations

import itertools
import json
import logging
import threading
import time
from collections.abc import Callable
from typing import Any
from urllib.parse import quote_plus

from langorch.config import Settings
from langorch.local._invoke import TRIGGER, LambdaInvoker

logger = logging.getLogger(__name__)

Invoke = Callable[[dict[str, Any]], Any]
"""Delivers one EventBridge envelope (the trigger Lambda's event)."""

QUEUE_NAME = "langorch-local-s3-events"
RULE_NAME = "langorch-local-s3-object-created"
VISIBILITY_TIMEOUT_SECONDS = 10
"""A failed delivery is retried this long after it was received."""
MAX_RECEIVES = 5
"""Receives before a message that keeps failing is dropped (the cloud would dead-letter it)."""

MOTO_SEQUENCER = "617f08299329d189"
"""The sequencer moto puts on every S3 EventBridge event."""


def object_created_pattern(bucket: str, exclude_prefix: str | None) -> dict[str, Any]:
    """The rule's event pattern: objects created in ``bucket``, except under ``exclude_prefix``."""
    detail: dict[str, Any] = {"bucket": {"name": [bucket]}}
    if exclude_prefix:
        detail["object"] = {"key": [{"anything-but": {"prefix": exclude_prefix}}]}
    return {"source": ["aws.s3"], "detail-type": ["Object Created"], "detail": detail}


# --------------------------------------------------------------------------------------------
# moto: a real sequencer per S3 event
# --------------------------------------------------------------------------------------------

_patch_lock = threading.Lock()
_patch_users = 0
_original_send: Any = None
_counter = itertools.count(time.time_ns() // 1000)


def _next_sequencer() -> str:
    return f"{next(_counter):018X}"


def _as_s3_sends(event: Any) -> None:
    if not isinstance(event, dict) or event.get("source") != "aws.s3":
        return
    obj = (event.get("detail") or {}).get("object")
    if isinstance(obj, dict) and obj.get("sequencer") == MOTO_SEQUENCER:
        # In place: moto hands the same dict to every rule, so they all see one value; the
        # moto constant marks an event not yet seen, so the key is encoded exactly once.
        obj["sequencer"] = _next_sequencer()
        if isinstance(obj.get("key"), str):
            obj["key"] = aws_encoded_key(obj["key"])


def aws_encoded_key(key: str) -> str:
    """The key as S3 puts it in an event: form-encoded, ``/`` and ``:`` left as they are.

    moto's EventBridge envelope carries the raw key, S3's is URL-encoded (see
    :mod:`langorch.domain.s3_notifications`); the trigger decodes with ``unquote_plus``.
    """
    return quote_plus(key, safe="/:")


def patch_moto_sequencer() -> Callable[[], None]:
    """Give every S3 EventBridge event moto emits its own growing sequencer (see module doc).

    Reference-counted: several pollers in one process share one patch.

    Returns:
        A function that removes this user's patch.
    """
    global _patch_users, _original_send
    try:
        from moto.events.models import Rule
    except ImportError:  # not running against moto in this process: nothing to fix
        return lambda: None
    with _patch_lock:
        if _patch_users == 0:
            original = Rule.send_to_targets
            _original_send = original

            def send_to_targets(self: Any, original_event: Any, *args: Any, **kwargs: Any) -> Any:
                _as_s3_sends(original_event)
                return original(self, original_event, *args, **kwargs)

            Rule.send_to_targets = send_to_targets  # type: ignore[method-assign]
        _patch_users += 1
    undone = threading.Event()

    def undo() -> None:
        global _patch_users, _original_send
        if undone.is_set():
            return
        undone.set()
        with _patch_lock:
            _patch_users -= 1
            if _patch_users == 0 and _original_send is not None:
                Rule.send_to_targets = _original_send  # type: ignore[method-assign]
                _original_send = None

    return undo


# --------------------------------------------------------------------------------------------
# Wiring and polling
# --------------------------------------------------------------------------------------------


def configure(
    s3: Any,
    events: Any,
    sqs: Any,
    *,
    bucket: str,
    exclude_prefix: str | None,
    queue_name: str = QUEUE_NAME,
    rule_name: str = RULE_NAME,
) -> str:
    """Send ``bucket``'s events to EventBridge and route "Object Created" to a new SQS queue.

    Idempotent: the bucket's other notification settings are kept, the queue and rule are
    created or updated in place.

    Returns:
        The queue URL.
    """
    current = s3.get_bucket_notification_configuration(Bucket=bucket)
    current.pop("ResponseMetadata", None)
    current["EventBridgeConfiguration"] = {}
    s3.put_bucket_notification_configuration(Bucket=bucket, NotificationConfiguration=current)
    queue_url = sqs.create_queue(
        QueueName=queue_name,
        Attributes={"VisibilityTimeout": str(VISIBILITY_TIMEOUT_SECONDS)},
    )["QueueUrl"]
    queue_arn = sqs.get_queue_attributes(QueueUrl=queue_url, AttributeNames=["QueueArn"])[
        "Attributes"
    ]["QueueArn"]
    events.put_rule(
        Name=rule_name,
        EventPattern=json.dumps(object_created_pattern(bucket, exclude_prefix)),
        State="ENABLED",
        Description="local mode: objects created in the drop bucket start matching workflows",
    )
    events.put_targets(Rule=rule_name, Targets=[{"Id": "trigger-queue", "Arn": queue_arn}])
    return str(queue_url)


class S3Events:
    """Polls the rule's queue and hands each envelope to the trigger.

    Args:
        sqs: a boto3 SQS client.
        queue_url: the rule's target queue.
        invoke: delivers one envelope.
    """

    def __init__(self, sqs: Any, queue_url: str, invoke: Invoke) -> None:
        self._sqs = sqs
        self.queue_url = queue_url
        self._invoke = invoke
        self._lock = threading.Lock()
        self._undo_patch: Callable[[], None] = lambda: None
        self.stopped = threading.Event()

    def pump(self) -> list[dict[str, Any]]:
        """Deliver every message waiting in the queue now (tests call this; no sleeping).

        Returns:
            The envelopes the trigger handled (their messages were deleted).
        """
        handled: list[dict[str, Any]] = []
        with self._lock:
            while True:
                response = self._sqs.receive_message(
                    QueueUrl=self.queue_url,
                    MaxNumberOfMessages=10,
                    WaitTimeSeconds=0,
                    AttributeNames=["ApproximateReceiveCount"],
                )
                messages = response.get("Messages") or []
                if not messages:
                    return handled
                for message in messages:
                    envelope = self._handle(message)
                    if envelope is not None:
                        handled.append(envelope)

    def _handle(self, message: dict[str, Any]) -> dict[str, Any] | None:
        receipt = message["ReceiptHandle"]
        try:
            envelope = json.loads(message["Body"])
        except (KeyError, ValueError):
            logger.error("dropping a message that is not an EventBridge event")
            self._delete(receipt)
            return None
        try:
            self._invoke(envelope)
        except Exception:
            receives = int((message.get("Attributes") or {}).get("ApproximateReceiveCount", 1))
            key = ((envelope.get("detail") or {}).get("object") or {}).get("key")
            if receives >= MAX_RECEIVES:
                logger.exception("event for %s failed %d times; dropped", key, receives)
                self._delete(receipt)
            else:
                logger.exception(
                    "event for %s failed (receive %d); it is redelivered in %d s",
                    key,
                    receives,
                    VISIBILITY_TIMEOUT_SECONDS,
                )
            return None
        self._delete(receipt)
        return dict(envelope)

    def _delete(self, receipt: str) -> None:
        self._sqs.delete_message(QueueUrl=self.queue_url, ReceiptHandle=receipt)

    def run(self, interval: float) -> None:
        """Pump every ``interval`` seconds until :attr:`stopped` is set."""
        while not self.stopped.is_set():
            try:
                self.pump()
            except Exception:
                # The emulator stopping under the poller ends up here; keep the loop alive.
                if not self.stopped.is_set():
                    logger.exception("cannot poll %s", self.queue_url)
            self.stopped.wait(interval)

    def __call__(self) -> None:
        """Stop polling and remove the emulator patch (the poller is its own stop function)."""
        self.stopped.set()
        self._undo_patch()


def connect(
    settings: Settings,
    *,
    invoke: Invoke | None = None,
    queue_name: str = QUEUE_NAME,
    rule_name: str = RULE_NAME,
) -> S3Events:
    """Configure the bucket, rule and queue, and return a poller that is not yet polling.

    Args:
        settings: the stack's settings (``bucket``, ``checkpoint_prefix``, endpoint).
        invoke: delivers one envelope (default: invokes the trigger function in the emulator).
        queue_name: the rule's target queue (tests use their own to see every event).
        rule_name: the rule.
    """
    from langorch.adapters.aws import make_client

    undo_patch = patch_moto_sequencer()
    try:
        sqs = make_client("sqs", settings)
        prefix = settings.checkpoint_prefix.strip("/")
        queue_url = configure(
            make_client("s3", settings),
            make_client("events", settings),
            sqs,
            bucket=settings.bucket,
            exclude_prefix=f"{prefix}/" if prefix else None,
            queue_name=queue_name,
            rule_name=rule_name,
        )
    except BaseException:
        undo_patch()
        raise
    poller = S3Events(sqs, queue_url, invoke or LambdaInvoker(settings, TRIGGER))
    poller._undo_patch = undo_patch
    return poller


def start_s3_events(
    settings: Settings, *, interval: float = 0.5, invoke: Invoke | None = None
) -> Callable[[], None]:
    """Route the drop bucket's object-created events to the trigger handler, in the background.

    Args:
        settings: the stack's settings.
        interval: seconds between polls of the queue when it is empty.
        invoke: delivers one envelope (default: invokes the trigger function in the emulator).

    Returns:
        A function that stops the poller; it is the :class:`S3Events` itself, so a caller can
        also ``pump()`` it.
    """
    poller = connect(settings, invoke=invoke)
    thread = threading.Thread(
        target=poller.run, args=(interval,), name="langorch-s3-events", daemon=True
    )
    thread.start()
    return poller
