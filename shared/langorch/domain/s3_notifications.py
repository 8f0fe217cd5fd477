"""Every shape in which S3 tells that an object was created, read into :class:`S3ObjectCreated`.

S3 reaches the trigger function in four envelopes, and each carries the object key
URL-encoded (form encoding: a space is ``+``, a ``+`` is ``%2B``):

* **EventBridge** ``Object Created`` (what the stack wires): ``detail.object.key``. AWS's own
  Powertools decodes this key with ``unquote_plus`` (``S3EventBridgeNotificationObject.key``),
  as it does for classic notifications; real events keep ``/`` and ``:`` as they are, which
  decoding leaves unchanged.
* **Classic notification**, direct to Lambda: ``Records[].s3.object.key`` (S3's documented
  "the object key name value is URL encoded", e.g. ``red flower.jpg`` → ``red+flower.jpg``).
* **Classic notification through SQS**: ``Records[].body`` is the notification's JSON (or an
  SNS envelope whose ``Message`` is, when SNS fans out to the queue).
* **Classic notification through SNS**: ``Records[].Sns.Message`` is the notification's JSON.

S3 also sends one ``s3:TestEvent`` when a notification is configured; it names no object and
starts nothing. Any other shape is refused with :class:`S3EventError` (never ignored silently).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from langorch.domain.errors import JsonInputError, LangorchError
from langorch.domain.limits import loads_strict
from langorch.domain.triggers import S3ObjectCreated, event_kind

OBJECT_CREATED_PREFIX = "ObjectCreated:"
"""Classic notifications name the event ``ObjectCreated:Put``, ``…:Copy``, ``…:Post``,
``…:CompleteMultipartUpload`` (sometimes with an ``s3:`` prefix)."""


class S3EventError(LangorchError, ValueError):
    """An event that claims to come from S3 but cannot be read as objects created."""


class _Bucket(BaseModel):
    model_config = ConfigDict(extra="ignore")
    name: str = Field(min_length=1)


class _Object(BaseModel):
    model_config = ConfigDict(extra="ignore", populate_by_name=True)
    key: str = Field(min_length=1)
    size: int | None = None
    e_tag: str | None = Field(default=None, alias="eTag")
    version_id: str | None = Field(default=None, alias="versionId")
    sequencer: str | None = None


class _S3(BaseModel):
    model_config = ConfigDict(extra="ignore")
    bucket: _Bucket
    object: _Object


class _Record(BaseModel):
    model_config = ConfigDict(extra="ignore", populate_by_name=True)
    event_name: str = Field(alias="eventName")
    s3: _S3


def objects_created(event: Mapping[str, Any]) -> list[S3ObjectCreated]:
    """The objects an S3 event (any of the module's four shapes) says were created.

    Args:
        event: the trigger function's event.

    Returns:
        One entry per created object, keys decoded; empty for ``s3:TestEvent`` and for
        records of other event types (removals, restores).

    Raises:
        S3EventError: the event does not have one of the shapes, with what was wrong.
    """
    if event.get("source") == "aws.s3":
        try:
            return [S3ObjectCreated.from_event(event)]
        except ValueError as exc:
            raise S3EventError(str(exc)) from exc
    if event_kind(event) != "s3":
        raise S3EventError("not an S3 event: neither EventBridge 'Object Created' nor 'Records'")
    found: list[S3ObjectCreated] = []
    for where, notification in _notifications(event):
        found.extend(_from_notification(notification, where))
    return found


def _notifications(event: Mapping[str, Any]) -> Iterator[tuple[str, Mapping[str, Any]]]:
    """Each classic S3 notification in the batch, unwrapped from SQS and SNS."""
    for index, record in enumerate(event["Records"]):
        where = f"Records[{index}]"
        if not isinstance(record, Mapping):
            raise S3EventError(f"{where} is not an object")
        source = record.get("eventSource") or record.get("EventSource")
        if source == "aws:s3":
            yield where, {"Records": [record]}
        elif source == "aws:sqs":
            body = f"{where}.body"
            yield body, _unwrap_sns(_json(record.get("body"), body), body)
        elif source == "aws:sns":
            sns = record.get("Sns")
            message = sns.get("Message") if isinstance(sns, Mapping) else None
            yield f"{where}.Sns.Message", _json(message, f"{where}.Sns.Message")
        else:
            raise S3EventError(f"{where}.eventSource is {source!r}, not aws:s3, aws:sqs or aws:sns")


def _unwrap_sns(body: Mapping[str, Any], where: str) -> Mapping[str, Any]:
    """An SQS body is the notification, or an SNS envelope around it (SNS → SQS fan-out)."""
    if body.get("Type") == "Notification" and "Message" in body:
        return _json(body["Message"], f"{where}.Message")
    return body


def _json(value: Any, where: str) -> Mapping[str, Any]:
    if not isinstance(value, str):
        raise S3EventError(f"{where} is missing or not a string")
    try:
        parsed = loads_strict(value, where)
    except JsonInputError as exc:
        raise S3EventError(str(exc)) from None
    if not isinstance(parsed, Mapping):
        raise S3EventError(f"{where} is not a JSON object")
    return parsed


def _from_notification(notification: Mapping[str, Any], where: str) -> list[S3ObjectCreated]:
    if notification.get("Event") == "s3:TestEvent":
        return []
    records = notification.get("Records")
    if not isinstance(records, list):
        raise S3EventError(f"{where} holds no S3 'Records' list")
    found = []
    for index, raw in enumerate(records):
        try:
            record = _Record.model_validate(raw)
        except ValidationError as exc:
            first = exc.errors()[0]
            path = ".".join(str(part) for part in first["loc"])
            raise S3EventError(f"{where}: S3 record {index}: {path}: {first['msg']}") from exc
        if not record.event_name.removeprefix("s3:").startswith(OBJECT_CREATED_PREFIX):
            continue
        found.append(_created(record))
    return found


def _created(record: _Record) -> S3ObjectCreated:
    obj = record.s3.object
    return S3ObjectCreated.from_notified(
        record.s3.bucket.name,
        obj.key,
        size=obj.size,
        etag=obj.e_tag,
        version_id=obj.version_id,
        sequencer=obj.sequencer,
    )
