"""What a checkpoint item holds: serialized payloads, compressed, or offloaded to S3.

``p`` is the serialized payload (``t`` its serde type, ``enc="zlib"`` when compressed), or
``ref`` its S3 key (``sz`` its stored size); ``m``/``mt`` the serialized metadata; ``par`` the
parent id. A payload of ``offload_threshold_bytes`` or more goes to S3 first, then the item that
references it; a referenced payload that is gone raises
:class:`~langorch.domain.errors.CheckpointPayloadMissingError` (no fallback to an older
checkpoint, which would replay finished steps).
"""

from __future__ import annotations

import builtins
import logging
import time
import zlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from botocore.exceptions import BotoCoreError, ClientError
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    WRITES_IDX_MAP,
    Checkpoint,
    CheckpointMetadata,
    CheckpointTuple,
    PendingWrite,
    get_serializable_checkpoint_metadata,
)
from langgraph.checkpoint.serde.base import SerializerProtocol

from langorch.adapters.dynamodb.checkpointer._keys import (
    Item,
    Items,
    address,
    checkpoint_object_key,
    checkpoint_sk,
    runnable_config,
    text,
    thread_object_prefix,
    write_sk,
    writes_object_key,
)
from langorch.adapters.dynamodb.checkpointer._table import CheckpointTable
from langorch.domain.errors import CheckpointPayloadMissingError, StorageError

if TYPE_CHECKING:
    from mypy_boto3_s3 import S3Client

logger = logging.getLogger(__name__)

Entries = list[tuple[int, str, Any]]

_DYNAMODB_ITEM_LIMIT = 400_000  # AWS allows 409,600 bytes; moto rejects at 405,000.
_MIN_COMPRESSION_GAIN = 0.9  # keep the compressed form only if it saves at least 10 %.
# Measured on a 30 KB msgpack state: level 1 compresses in 0.03 ms to 6.9 %, level 6 in
# 0.18 ms to 6.0 %. Write units cost far more than those CPU microseconds, so 6.
_ZLIB_LEVEL = 6


@dataclass
class PayloadCodec:
    """Turns checkpoints and writes into items and back, offloading big payloads to S3.

    Args:
        table: the checkpoint table (its error wrapping is used for S3 calls too).
        serde: LangGraph's serializer.
        s3_client: for payloads too large for an item (none: such a payload is refused).
        bucket: the bucket of offloaded payloads.
        key_prefix: prefix of offloaded payloads' keys.
        ttl_seconds: when set, every item carries ``ttl`` = write time + this.
        offload_threshold_bytes: payloads of this size or more (after compression) go to S3.
        compression_min_bytes: payloads of this size or more are zlib-compressed when that
            saves at least 10 %; ``None`` disables compression.
    """

    table: CheckpointTable
    serde: SerializerProtocol
    s3_client: S3Client | None
    bucket: str | None
    key_prefix: str
    ttl_seconds: int | None
    offload_threshold_bytes: int
    compression_min_bytes: int | None

    # ------------------------------------------------------------------ encoding

    def checkpoint_item(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        delta: tuple[dict[str, Any], str] | None = None,
    ) -> Item:
        """The item of a checkpoint whose parent ``config`` addresses.

        With ``delta`` (a payload of :func:`._deltas.encode` and the id of the oldest item a
        read needs), the item holds that payload (``dv`` set, ``base`` the id); without, the
        whole checkpoint (the format before deltas, still read).
        """
        thread_id, ns = address(config)
        parent_id = config["configurable"].get("checkpoint_id")
        checkpoint_id = checkpoint["id"]
        meta_type, meta_bytes = self.serde.dumps_typed(
            get_serializable_checkpoint_metadata(config, metadata)
        )
        item: Item = {
            "PK": {"S": thread_id},
            "SK": {"S": checkpoint_sk(ns, checkpoint_id)},
            "k": {"S": "c"},
            "ns": {"S": ns},
            "cid": {"S": checkpoint_id},
            "mt": {"S": meta_type},
            "m": {"B": meta_bytes},
        }
        if parent_id:
            item["par"] = {"S": str(parent_id)}
        if delta is not None:
            item["dv"] = {"N": "1"}
            item["base"] = {"S": delta[1]}
        self._set_payload(
            item,
            self.serde.dumps_typed(checkpoint if delta is None else delta[0]),
            s3_key=checkpoint_object_key(self.key_prefix, thread_id, ns, checkpoint_id),
            overhead=len(meta_bytes),
        )
        return item

    def write_items(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str,
    ) -> Items:
        """The items of a task's writes: one for its regular writes, one per special channel.

        A special channel is stored under the negative index LangGraph gives it (``-1`` error,
        ``-3`` interrupt, ...), which keeps it from overwriting the regular writes.
        """
        thread_id, ns = address(config)
        checkpoint_id = str(config["configurable"]["checkpoint_id"])
        regular = [
            (idx, channel, value)
            for idx, (channel, value) in enumerate(writes)
            if channel not in WRITES_IDX_MAP
        ]
        groups: builtins.list[tuple[str, Entries]] = [("r", regular)] if regular else []
        for channel, value in writes:
            if channel in WRITES_IDX_MAP:
                idx = WRITES_IDX_MAP[channel]
                groups.append((str(idx), [(idx, channel, value)]))
        items: Items = []
        for slot, entries in groups:
            item: Item = {
                "PK": {"S": thread_id},
                "SK": {"S": write_sk(ns, checkpoint_id, task_id, slot)},
                "k": {"S": "w"},
                "ns": {"S": ns},
                "cid": {"S": checkpoint_id},
                "tid": {"S": task_id},
                "tp": {"S": task_path},
            }
            self._set_payload(
                item,
                self.serde.dumps_typed([list(entry) for entry in entries]),
                s3_key=writes_object_key(
                    self.key_prefix, thread_id, ns, checkpoint_id, task_id, slot
                ),
                overhead=0,
            )
            items.append(item)
        return items

    def _set_payload(
        self, item: Item, typed: tuple[str, bytes], *, s3_key: str, overhead: int
    ) -> None:
        """Put the serialized payload in ``item``: inline, compressed, or as an S3 reference."""
        serde_type, data = typed
        item["t"] = {"S": serde_type}
        if self.compression_min_bytes is not None and len(data) >= self.compression_min_bytes:
            compressed = zlib.compress(data, _ZLIB_LEVEL)
            if len(compressed) <= len(data) * _MIN_COMPRESSION_GAIN:
                data = compressed
                item["enc"] = {"S": "zlib"}
        if self.ttl_seconds is not None:
            item["ttl"] = {"N": str(int(time.time()) + self.ttl_seconds)}
        if len(data) + overhead < self.offload_threshold_bytes:
            item["p"] = {"B": data}
            return
        if self.s3_client is None or not self.bucket:
            if len(data) + overhead < _DYNAMODB_ITEM_LIMIT - 2_000:
                item["p"] = {"B": data}
                return
            raise StorageError(
                f"A checkpoint payload of {len(data)} bytes for thread {text(item, 'PK')} exceeds "
                "DynamoDB's 400 KB item limit and no S3 offload is configured "
                "(hint: pass s3_client and bucket to DynamoCheckpointSaver)"
            )
        # S3 first, then the item that points at it: a reader never sees a dangling reference
        # unless the object is deleted later, which get_tuple reports loudly.
        self.table.call(
            "S3 PutObject", self.s3_client.put_object, Bucket=self.bucket, Key=s3_key, Body=data
        )
        item["ref"] = {"S": s3_key}
        item["sz"] = {"N": str(len(data))}
        logger.debug("offloaded %d bytes to s3://%s/%s", len(data), self.bucket, s3_key)

    # ------------------------------------------------------------------ decoding

    def to_tuple(
        self,
        checkpoint_item: Item,
        write_items: Sequence[Item],
        buffered: Mapping[tuple[str, str], Item],
        checkpoint: Checkpoint | None = None,
    ) -> CheckpointTuple:
        """A checkpoint with its pending writes: stored ones, replaced by buffered ones.

        ``checkpoint`` is the item's checkpoint when the caller assembled it (a delta item);
        without it, the item's payload is the whole checkpoint.
        """
        thread_id = text(checkpoint_item, "PK")
        ns = text(checkpoint_item, "ns")
        checkpoint_id = text(checkpoint_item, "cid")
        # Buffered items replace stored ones with the same key, as the coming write will.
        merged = {text(item, "SK"): item for item in write_items}
        for (pk, sk), item in buffered.items():
            if (
                pk == thread_id
                and text(item, "k") == "w"
                and text(item, "cid") == checkpoint_id
                and text(item, "ns") == ns
            ):
                merged[sk] = item
        ordered: builtins.list[tuple[tuple[str, str, int], PendingWrite]] = []
        for item in merged.values():
            task_id, task_path = text(item, "tid"), text(item, "tp")
            for idx, channel, value in self.payload(item):
                ordered.append(((task_path, task_id, int(idx)), (task_id, str(channel), value)))
        ordered.sort(key=lambda pair: pair[0])
        parent = checkpoint_item.get("par", {}).get("S")
        return CheckpointTuple(
            config=runnable_config(thread_id, ns, checkpoint_id),
            checkpoint=self.payload(checkpoint_item) if checkpoint is None else checkpoint,
            metadata=self.metadata(checkpoint_item),
            parent_config=runnable_config(thread_id, ns, parent) if parent else None,
            pending_writes=[write for _, write in ordered],
        )

    def metadata(self, item: Item) -> CheckpointMetadata:
        """A checkpoint item's metadata."""
        metadata: CheckpointMetadata = self.serde.loads_typed(
            (text(item, "mt"), bytes(item["m"]["B"]))
        )
        return metadata

    def payload(self, item: Item) -> Any:
        """Read back what :meth:`_set_payload` stored."""
        data = bytes(item["p"]["B"]) if "p" in item else self._fetch_offloaded(item)
        if item.get("enc", {}).get("S") == "zlib":
            data = zlib.decompress(data)
        return self.serde.loads_typed((text(item, "t"), data))

    def _fetch_offloaded(self, item: Item) -> bytes:
        key = text(item, "ref")
        where = (
            f"thread {text(item, 'PK')}, namespace {text(item, 'ns')!r}, "
            f"checkpoint {text(item, 'cid')}"
        )
        if self.s3_client is None or not self.bucket:
            raise StorageError(
                f"The payload of {where} is offloaded to S3 (key {key}) but this saver has no "
                "S3 client or bucket (hint: pass s3_client and bucket to DynamoCheckpointSaver)"
            )
        try:
            body = self.s3_client.get_object(Bucket=self.bucket, Key=key)["Body"].read()
        except ClientError as exc:
            code = exc.response.get("Error", {}).get("Code", "")
            if code in ("NoSuchKey", "404", "NotFound"):
                raise CheckpointPayloadMissingError(
                    f"The offloaded payload of {where} is missing: s3://{self.bucket}/{key}. "
                    "The run cannot resume from this checkpoint and will not silently fall back "
                    "to an older one (hint: restore the object from a backup or version, or "
                    "fail the run)"
                ) from exc
            raise self.table.storage_error("S3 GetObject", exc) from exc
        except BotoCoreError as exc:
            raise StorageError(f"S3 GetObject for {where} failed: {exc}") from exc
        data = bytes(body)
        if "sz" in item and len(data) != int(item["sz"]["N"]):
            raise StorageError(
                f"The offloaded payload of {where} at s3://{self.bucket}/{key} has "
                f"{len(data)} bytes, {item['sz']['N']} expected: it was replaced or truncated"
            )
        return data

    # ------------------------------------------------------------------ deleting

    def delete_thread(self, thread_id: str) -> None:
        """Delete every offloaded payload of a thread (nothing without S3)."""
        if self.s3_client is None or not self.bucket:
            return
        prefix = thread_object_prefix(self.key_prefix, thread_id)
        token: str | None = None
        while True:
            kwargs: dict[str, Any] = {"Bucket": self.bucket, "Prefix": prefix}
            if token:
                kwargs["ContinuationToken"] = token
            listing = self.table.call("S3 ListObjectsV2", self.s3_client.list_objects_v2, **kwargs)
            objects = [{"Key": obj["Key"]} for obj in listing.get("Contents", [])]
            if objects:
                self.table.call(
                    "S3 DeleteObjects",
                    self.s3_client.delete_objects,
                    Bucket=self.bucket,
                    Delete={"Objects": objects, "Quiet": True},
                )
            token = listing.get("NextContinuationToken")
            if not listing.get("IsTruncated") or not token:
                return
