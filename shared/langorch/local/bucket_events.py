"""S3 object-created events in local mode: files in the bucket folder start matching workflows.

In the cloud, the drop bucket sends its events to EventBridge and a rule for ``aws.s3`` "Object
Created" invokes the trigger Lambda with the EventBridge envelope. Locally the bucket is a folder
(:class:`~langorch.adapters.local_files.FolderBucket`); :class:`BucketEvents` watches it and hands
the trigger the same envelope — ``version``, ``id``, ``detail-type``, ``source``, ``account``,
``time``, ``region``, ``resources``, ``detail.bucket.name``, ``detail.object.key`` (URL-encoded
as S3 encodes it), ``size``, ``etag``, ``sequencer``, ``detail.reason`` — for every file that
appeared or changed, whether ``langorch files put`` wrote it or a person copied it in.

What it promises, as S3 and EventBridge do:

- **Each new or changed object gets one event**, with a sequencer that grows with every event
  (18 upper-case hex digits, like S3's); the trigger's dedupe key is bucket + key + sequencer,
  so a later upload of the same key starts runs again and a redelivery starts nothing.
- **At least once.** An event is noted (with its sequencer) before it is handed over and marked
  delivered after the handler returned; a failure is tried again on the next scans, at most
  :data:`MAX_ATTEMPTS` times, then dropped with an error. A crash in between redelivers it with
  the same sequencer.
- **Nothing is lost across a restart**: what was delivered is in the home's database, so files
  dropped while the stack was down are announced when it starts, and nothing twice.
- **Only whole files.** A file is announced once its size and modification time held still for
  one scan (a ``cp`` in progress is not an object yet); ``files put`` renames a finished copy
  into place.
"""

from __future__ import annotations

import logging
import threading
import uuid
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any
from urllib.parse import quote_plus

from langorch.adapters.local_files import FolderBucket, StoredObject, etag_of
from langorch.adapters.sqlite._db import Database
from langorch.local._invoke import ACCOUNT_ID

logger = logging.getLogger(__name__)

Invoke = Callable[[dict[str, Any]], Any]
"""Delivers one envelope (the trigger function)."""

MAX_ATTEMPTS = 5
"""Deliveries of one event before it is dropped (the SQS queue's maxReceiveCount before)."""

SCHEMA = (
    "CREATE TABLE IF NOT EXISTS bucket_objects ("
    " key TEXT PRIMARY KEY, size INTEGER NOT NULL, mtime_ns INTEGER NOT NULL,"
    " etag TEXT NOT NULL, sequencer INTEGER NOT NULL, delivered INTEGER NOT NULL,"
    " attempts INTEGER NOT NULL DEFAULT 0)",
)


def aws_encoded_key(key: str) -> str:
    """The key as S3 puts it in an event: form-encoded, ``/`` and ``:`` left as they are."""
    return quote_plus(key, safe="/:")


def envelope(
    stored: StoredObject, *, etag: str, sequencer: int, bucket: str, region: str
) -> dict[str, Any]:
    """The EventBridge ``Object Created`` event S3 sends for ``stored``."""
    return {
        "version": "0",
        "id": str(uuid.uuid4()),
        "detail-type": "Object Created",
        "source": "aws.s3",
        "account": ACCOUNT_ID,
        "time": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "region": region,
        "resources": [f"arn:aws:s3:::{bucket}"],
        "detail": {
            "version": "0",
            "bucket": {"name": bucket},
            "object": {
                "key": aws_encoded_key(stored.key),
                "size": stored.size,
                "etag": etag,
                "sequencer": f"{sequencer:018X}",
            },
            "request-id": uuid.uuid4().hex[:16].upper(),
            "requester": ACCOUNT_ID,
            "source-ip-address": "127.0.0.1",
            "reason": "PutObject",
        },
    }


class BucketEvents:
    """Watches the bucket folder and hands each new or changed object's event to ``invoke``.

    Args:
        bucket: the folder.
        db: the home's database (what was announced, and each event's sequencer).
        invoke: delivers one envelope.
        region: the stack's region (in the envelope).
    """

    def __init__(self, bucket: FolderBucket, db: Database, invoke: Invoke, *, region: str) -> None:
        self._bucket = bucket
        self._db = db
        self._invoke = invoke
        self._region = region
        self._lock = threading.Lock()
        self._last_seen: dict[str, tuple[int, int]] = {}
        self.stopped = threading.Event()
        db.ensure_schema("bucket_objects", SCHEMA)

    def pump(self) -> list[dict[str, Any]]:
        """Scan once and deliver what is due (tests call this; no sleeping).

        Returns:
            The envelopes the trigger handled.
        """
        with self._lock:
            seen = {o.key: o for o in self._bucket.objects()}
            settled = [
                o for o in seen.values() if self._last_seen.get(o.key) == (o.size, o.mtime_ns)
            ]
            self._last_seen = {key: (o.size, o.mtime_ns) for key, o in seen.items()}
            handled = []
            for stored in settled:
                event = self._due(stored)
                if event is not None and self._deliver(stored.key, event):
                    handled.append(event)
            return handled

    def _due(self, stored: StoredObject) -> dict[str, Any] | None:
        """The event ``stored`` is owed (noted with its sequencer), or ``None``."""
        with self._db.write() as connection:
            row = connection.execute(
                "SELECT size, mtime_ns, etag, sequencer, delivered, attempts FROM bucket_objects"
                " WHERE key = ?",
                (stored.key,),
            ).fetchone()
            if row is not None and (row[0], row[1]) == (stored.size, stored.mtime_ns):
                _, _, etag, sequencer, delivered, attempts = row
                if delivered or attempts >= MAX_ATTEMPTS:
                    return None
            else:
                etag = etag_of(self._bucket.path_of(stored.key))
                sequencer = 1 + int(
                    connection.execute(
                        "SELECT coalesce(max(sequencer), 0) FROM bucket_objects"
                    ).fetchone()[0]
                )
                connection.execute(
                    "INSERT OR REPLACE INTO bucket_objects"
                    " (key, size, mtime_ns, etag, sequencer, delivered, attempts)"
                    " VALUES (?, ?, ?, ?, ?, 0, 0)",
                    (stored.key, stored.size, stored.mtime_ns, etag, sequencer),
                )
        return envelope(
            stored,
            etag=etag,
            sequencer=sequencer,
            bucket=self._bucket.bucket,
            region=self._region,
        )

    def _deliver(self, key: str, event: dict[str, Any]) -> bool:
        try:
            self._invoke(event)
        except Exception:
            with self._db.write() as connection:
                connection.execute(
                    "UPDATE bucket_objects SET attempts = attempts + 1 WHERE key = ?", (key,)
                )
                attempts = connection.execute(
                    "SELECT attempts FROM bucket_objects WHERE key = ?", (key,)
                ).fetchone()[0]
            if attempts >= MAX_ATTEMPTS:
                logger.exception("the event for %s failed %d times; dropped", key, attempts)
            else:
                logger.exception("the event for %s failed (attempt %d); tried again", key, attempts)
            return False
        with self._db.write() as connection:
            connection.execute("UPDATE bucket_objects SET delivered = 1 WHERE key = ?", (key,))
        return True

    def run(self, interval: float) -> None:
        """Scan every ``interval`` seconds until :attr:`stopped` is set."""
        while not self.stopped.is_set():
            try:
                self.pump()
            except Exception:
                if not self.stopped.is_set():
                    logger.exception("cannot scan the bucket folder %s", self._bucket.root)
            self.stopped.wait(interval)

    def __call__(self) -> None:
        """Stop watching (the watcher is its own stop function)."""
        self.stopped.set()


def start_bucket_events(
    bucket: FolderBucket, db: Database, invoke: Invoke, *, region: str, interval: float = 0.5
) -> BucketEvents:
    """Watch the bucket folder in a background thread.

    Returns:
        The watcher: call it to stop, or ``pump()`` it.
    """
    watcher = BucketEvents(bucket, db, invoke, region=region)
    thread = threading.Thread(
        target=watcher.run, args=(interval,), name="langorch-bucket-events", daemon=True
    )
    thread.start()
    return watcher
