"""Approvals in the runs table: the record, its server-side secrets, votes and audit trail.

The layout of the items is in :mod:`langorch.adapters.dynamodb.approvals._items`. Deciding is one
conditional ``UpdateItem`` (pending and not expired): DynamoDB serialises writes to an item, so
of two concurrent decisions exactly one wins and the other reads who won. ``delivered_at`` is set
once the decision has reached the run; a delivered decision is final (never reopened, timed out
or cancelled), and one without it can be delivered again. Audit items are only ever created
(``attribute_not_exists``), never updated or deleted here.
"""

from __future__ import annotations

import builtins
import json
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from datetime import datetime
from typing import Any, cast

from botocore.exceptions import ClientError

from langorch.adapters.dynamodb._items import batch_get
from langorch.adapters.dynamodb._items import error_code as _code
from langorch.adapters.dynamodb._items import old_item as _old_item
from langorch.adapters.dynamodb._items import utc_iso as _utc_iso
from langorch.adapters.dynamodb.approvals import guards as approval_guards
from langorch.adapters.dynamodb.approvals import votes as approval_votes
from langorch.adapters.dynamodb.approvals._items import (
    ALL_PARTITION,
    APPROVAL_SK,
    PENDING_PARTITION,
    approval_of,
    list_query,
    request_json,
)
from langorch.adapters.dynamodb.approvals._items import audit_pk as _audit_pk
from langorch.adapters.dynamodb.approvals._items import pk as _pk
from langorch.adapters.dynamodb.approvals._items import text as _s
from langorch.domain.approvals.audit import chain_key, chained
from langorch.domain.approvals.policy import Vote, VotesChangedError
from langorch.domain.approvals.record import (
    CLOSED,
    AlreadyDecidedError,
    Approval,
    ApprovalStatus,
    AuditEntry,
    LinkExpiredError,
    RunEndedError,
    SupersededError,
)
from langorch.domain.errors import NotFoundError, StorageError
from langorch.domain.evidence import GENESIS

SECRET_SK = "secret"  # noqa: S105 - an item name
MAX_COMMENT_CHARS = 4000
MAX_LIST = 1000

# Conditions, named (habit 8).
APPROVAL_IS_NEW = "attribute_not_exists(pk)"
IS_DECIDABLE = "#status = :pending AND expires_at > :now"
"""Only a pending approval that has not expired takes a decision — the decide-once rule."""
AUDIT_PREFIX = "audit#"
ENTRY_IS_NEW = "attribute_not_exists(pk)"
CHAIN_PREFIX = "auditchain#"
"""The partition of a run's audit chain head (``auditchain#run#<run_id>``)."""
CHAIN_HEAD_SK = "head"
HEAD_UNMOVED = "attribute_not_exists(pk) OR digest = :prev"
"""A chain's head moves only from the line the writer read as the last."""
CHAIN_ATTEMPTS = 50
"""Writers racing for one run's chain: each retry reads the head anew."""
VOTES_UNCHANGED = "vote_count = :count"
"""A counted decision is written with exactly the votes it read (none arrived since)."""
IS_OPEN = (
    "attribute_exists(pk) AND NOT #status IN (:timed_out, :cancelled, :superseded) "
    "AND attribute_not_exists(delivered_at)"
)
"""Timing out or cancelling applies to anything not already closed (including a decision that
could not be delivered because the task had closed), but never to a decision the run got."""
IS_THIS_DECISION = (
    "#status = :decision AND decided_by = :by AND decided_at = :at "
    "AND attribute_not_exists(delivered_at)"
)
IS_DECIDED = "#status IN (:approved, :rejected)"


def _still_decidable(approval: Approval, now: datetime) -> bool:
    return approval.is_pending and int(approval.expires_at.timestamp()) > int(now.timestamp())


def _new_suffix() -> str:
    # Entries written in the same microsecond still sort in the order this process wrote them.
    return f"{time.monotonic_ns():016x}{uuid.uuid4().hex[:8]}"


class ApprovalsRepository:
    """Approvals, their task tokens and audit trails in the runs table (layout above).

    Args:
        client: a boto3 DynamoDB client.
        table_name: the runs table (``Settings.runs_table``).
        suffix: random part of audit sort keys (tests may fix it).
    """

    def __init__(
        self, client: Any, table_name: str, *, suffix: Callable[[], str] = _new_suffix
    ) -> None:
        self._client = client
        self._table = table_name
        self._suffix = suffix

    # ----------------------------------------------------------------------------------------
    # Writes
    # ----------------------------------------------------------------------------------------

    def put_pending(self, approval: Approval, task_token: str) -> tuple[Approval, bool]:
        """Store a new pending approval and its task token, once per approval id.

        A retried request (same run and interrupt) stores nothing new and returns the stored
        approval; if it is still pending its token is replaced, since Step Functions waits on
        the newest one.

        Returns:
            The stored approval and whether this call created it.

        Raises:
            StorageError: DynamoDB failed.
        """
        created = _utc_iso(approval.created_at)
        item: dict[str, Any] = {
            "pk": {"S": _pk(approval.approval_id)},
            "sk": {"S": APPROVAL_SK},
            "approval_id": {"S": approval.approval_id},
            "run_id": {"S": approval.run_id},
            "status": {"S": ApprovalStatus.pending.value},
            "created_at": {"S": created},
            "expires_at": {"N": str(int(approval.expires_at.timestamp()))},
            "body": {"S": request_json(approval)},
            "gsi1pk": {"S": ALL_PARTITION},
            "gsi1sk": {"S": f"{created}#{approval.approval_id}"},
            "gsi2pk": {"S": PENDING_PARTITION},
            "gsi2sk": {"S": f"{created}#{approval.approval_id}"},
        }
        if approval.workflow_id:
            item["workflow_id"] = {"S": approval.workflow_id}
        secret = {
            "pk": {"S": _pk(approval.approval_id)},
            "sk": {"S": SECRET_SK},
            "task_token": {"S": task_token},
        }
        try:
            self._client.transact_write_items(
                TransactItems=[
                    {
                        "Put": {
                            "TableName": self._table,
                            "Item": item,
                            "ConditionExpression": APPROVAL_IS_NEW,
                        }
                    },
                    {"Put": {"TableName": self._table, "Item": secret}},
                ]
            )
            return approval, True
        except ClientError as exc:
            reasons = cast(dict[str, Any], exc.response).get("CancellationReasons") or []
            if not (reasons and reasons[0].get("Code") == "ConditionalCheckFailed"):
                raise self._storage_error("TransactWriteItems", exc) from exc
        stored = self.get(approval.approval_id)
        if stored is None:  # pragma: no cover - the condition just saw it
            raise StorageError(f"approval {approval.approval_id} vanished while being stored")
        if stored.is_pending:
            self._replace_token(approval.approval_id, task_token)
        return stored, False

    def _replace_token(self, approval_id: str, task_token: str) -> None:
        try:
            self._client.update_item(
                TableName=self._table,
                Key={"pk": {"S": _pk(approval_id)}, "sk": {"S": SECRET_SK}},
                UpdateExpression="SET task_token = :token",
                ExpressionAttributeValues={":token": {"S": task_token}},
            )
        except ClientError as exc:
            raise self._storage_error("UpdateItem", exc) from exc

    def decide(
        self,
        approval_id: str,
        decision: ApprovalStatus,
        approver: str,
        comment: str | None,
        edits: dict[str, Any],
        now: datetime,
        votes: Sequence[Vote] = (),
    ) -> Approval:
        """Record the decision, once: one conditional write (pending and not expired).

        ``votes``: every vote of a counted decision, recorded with it (so a decision delivered
        again carries exactly the same votes); the write then also requires that no vote was
        added since they were read (``vote_count``), else :class:`VotesChangedError`.

        Returns:
            The decided approval.

        Raises:
            AlreadyDecidedError: someone decided first (carries who and when).
            LinkExpiredError: the approval expired or timed out.
            RunEndedError: the approval was cancelled.
            NotFoundError: no such approval.
            StorageError: DynamoDB failed.
        """
        if decision not in (ApprovalStatus.approved, ApprovalStatus.rejected):
            raise ValueError(f"a decision is approved or rejected, not {decision}")
        condition, counted = IS_DECIDABLE, {}
        if votes:
            condition, counted = (
                f"{IS_DECIDABLE} AND {VOTES_UNCHANGED}",
                {":count": {"N": str(len(votes))}},
            )
        try:
            response = self._client.update_item(
                TableName=self._table,
                Key={"pk": {"S": _pk(approval_id)}, "sk": {"S": APPROVAL_SK}},
                UpdateExpression=(
                    "SET #status = :decision, decided_by = :by, decided_at = :at, "
                    "#comment = :comment, edits = :edits, votes = :votes REMOVE gsi2pk, gsi2sk"
                ),
                ConditionExpression=condition,
                ExpressionAttributeNames={"#status": "status", "#comment": "comment"},
                ExpressionAttributeValues={
                    **counted,
                    ":decision": {"S": decision.value},
                    ":by": {"S": approver},
                    ":at": {"S": _utc_iso(now)},
                    ":comment": {"S": (comment or "")[:MAX_COMMENT_CHARS]},
                    ":edits": {"S": json.dumps(edits, default=str)},
                    ":votes": {"S": json.dumps([v.model_dump(mode="json") for v in votes])},
                    ":pending": {"S": ApprovalStatus.pending.value},
                    ":now": {"N": str(int(now.timestamp()))},
                },
                ReturnValues="ALL_NEW",
                ReturnValuesOnConditionCheckFailure="ALL_OLD",
            )
        except ClientError as exc:
            if _code(exc) != "ConditionalCheckFailedException":
                raise self._storage_error("UpdateItem", exc) from exc
            old = _old_item(exc)
            if votes and old is not None and _still_decidable(self._approval(old), now):
                raise VotesChangedError(
                    f"approval {approval_id}: a vote arrived meanwhile"
                ) from exc
            raise self._refusal(approval_id, old) from exc
        return self._approval(response["Attributes"])

    def _refusal(self, approval_id: str, old: dict[str, Any] | None) -> Exception:
        if old is None:
            return NotFoundError(f"approval {approval_id} does not exist")
        approval = self._approval(old)
        if approval.status in (ApprovalStatus.approved, ApprovalStatus.rejected):
            return AlreadyDecidedError(
                approval_id, approval.status, approval.decided_by, approval.decided_at
            )
        if approval.status is ApprovalStatus.cancelled:
            return RunEndedError(f"approval {approval_id} was cancelled")
        if approval.status is ApprovalStatus.superseded:
            return SupersededError(f"approval {approval_id} was superseded")
        return LinkExpiredError(f"approval {approval_id} expired before the decision")

    def reopen(self, approval: Approval) -> bool:
        """Undo a decision that could not be delivered, so the approver can press again.

        Only the exact decision passed in is undone (same status, approver and time), so a
        decision made by anyone else is never touched.

        Returns:
            Whether it was reopened.
        """
        if approval.decided_at is None or approval.decided_by is None:
            return False
        created = _utc_iso(approval.created_at)
        try:
            self._client.update_item(
                TableName=self._table,
                Key={"pk": {"S": _pk(approval.approval_id)}, "sk": {"S": APPROVAL_SK}},
                UpdateExpression=(
                    "SET #status = :pending, gsi2pk = :gpk, gsi2sk = :gsk "
                    "REMOVE decided_by, decided_at, #comment, edits"
                ),
                ConditionExpression=IS_THIS_DECISION,
                ExpressionAttributeNames={"#status": "status", "#comment": "comment"},
                ExpressionAttributeValues={
                    ":pending": {"S": ApprovalStatus.pending.value},
                    ":gpk": {"S": PENDING_PARTITION},
                    ":gsk": {"S": f"{created}#{approval.approval_id}"},
                    ":decision": {"S": approval.status.value},
                    ":by": {"S": approval.decided_by},
                    ":at": {"S": _utc_iso(approval.decided_at)},
                },
            )
        except ClientError as exc:
            if _code(exc) == "ConditionalCheckFailedException":
                return False
            raise self._storage_error("UpdateItem", exc) from exc
        return True

    # Votes, delegations and timers (adapters/dynamodb/approvals/votes.py) ---------------------

    def record_vote(self, approval_id: str, slot: str, vote: Vote) -> bool:
        """Record one vote in the approver's slot; ``False`` when the slot has one already.

        Raises:
            AlreadyDecidedError, LinkExpiredError, RunEndedError, NotFoundError: the approval
            is no longer decidable (as :meth:`decide`).
        """
        written = self._take_slot(approval_votes.vote_items(self._table, approval_id, slot, vote))
        if written == "closed":
            raise self._refusal(approval_id, self._get_item(approval_id, APPROVAL_SK))
        return written == "written"

    def votes(self, approval_id: str) -> builtins.list[Vote]:
        """The approval's votes, oldest first (consistent)."""
        query = approval_votes.prefix_query(self._table, approval_id, approval_votes.VOTE_PREFIX)
        return approval_votes.votes_of(list(self._query(query)))

    def delegate(self, approval_id: str, slot: str, delegator: str, to: str, now: datetime) -> bool:
        """Hand the delegator's slot to ``to``; ``False`` when the slot was used (voted or
        delegated) or ``to`` is a delegate already. Raises like :meth:`record_vote` when the
        approval is no longer decidable."""
        items = approval_votes.delegation_items(self._table, approval_id, slot, delegator, to, now)
        written = self._take_slot(items)
        if written != "closed":
            return written == "written"
        item = self._get_item(approval_id, APPROVAL_SK)
        current = None if item is None else self._approval(item)
        if current is not None and current.is_pending and now < current.expires_at:
            return False
        raise self._refusal(approval_id, item)

    def _take_slot(self, items: builtins.list[dict[str, Any]]) -> approval_votes.Written:
        try:
            self._client.transact_write_items(TransactItems=items)
        except ClientError as exc:
            outcome = approval_votes.slot_outcome(exc)
            if outcome is None:
                raise self._storage_error("TransactWriteItems", exc) from exc
            return outcome
        return "written"

    def advance_timer(self, approval_id: str, counter: str, seen: int) -> bool:
        """Count a reminder or escalation once (from ``seen``); whether this call did."""
        try:
            self._client.update_item(
                **approval_votes.timer_update(self._table, approval_id, counter, seen)
            )
        except ClientError as exc:
            if _code(exc) == "ConditionalCheckFailedException":
                return False
            raise self._storage_error("UpdateItem", exc) from exc
        return True

    def mark_delivered(self, approval_id: str, now: datetime) -> Approval | None:
        """Note that the recorded decision reached the run (the first time noted is kept).

        From then on the decision is final: :meth:`mark` and :meth:`reopen` leave it alone.

        Returns:
            The decided approval, or ``None`` when it holds no decision (pending, closed or
            missing): then there is nothing to deliver.

        Raises:
            StorageError: DynamoDB failed.
        """
        try:
            response = self._client.update_item(
                TableName=self._table,
                Key={"pk": {"S": _pk(approval_id)}, "sk": {"S": APPROVAL_SK}},
                UpdateExpression="SET delivered_at = if_not_exists(delivered_at, :at)",
                ConditionExpression=IS_DECIDED,
                ExpressionAttributeNames={"#status": "status"},
                ExpressionAttributeValues={
                    ":at": {"S": _utc_iso(now)},
                    ":approved": {"S": ApprovalStatus.approved.value},
                    ":rejected": {"S": ApprovalStatus.rejected.value},
                },
                ReturnValues="ALL_NEW",
            )
        except ClientError as exc:
            if _code(exc) == "ConditionalCheckFailedException":
                return None
            raise self._storage_error("UpdateItem", exc) from exc
        return self._approval(response["Attributes"])

    def mark(self, approval_id: str, status: ApprovalStatus) -> bool:
        """Close the approval as ``timed_out``, ``cancelled`` or ``superseded`` unless it is
        closed already.

        Returns:
            Whether this call changed it (``False``: missing, already closed, or a decision
            already delivered to the run).
        """
        if status not in CLOSED:
            raise ValueError(f"mark closes an approval as one of {sorted(CLOSED)}, not {status}")
        try:
            self._client.update_item(
                TableName=self._table,
                Key={"pk": {"S": _pk(approval_id)}, "sk": {"S": APPROVAL_SK}},
                UpdateExpression="SET #status = :status REMOVE gsi2pk, gsi2sk",
                ConditionExpression=IS_OPEN,
                ExpressionAttributeNames={"#status": "status"},
                ExpressionAttributeValues={
                    ":status": {"S": status.value},
                    ":timed_out": {"S": ApprovalStatus.timed_out.value},
                    ":cancelled": {"S": ApprovalStatus.cancelled.value},
                    ":superseded": {"S": ApprovalStatus.superseded.value},
                },
            )
        except ClientError as exc:
            if _code(exc) == "ConditionalCheckFailedException":
                return False
            raise self._storage_error("UpdateItem", exc) from exc
        return True

    def mark_emailed(self, approval_id: str, approver_ref: str) -> None:
        """Remember that this approver's email went out (a retried request skips them)."""
        self._update(
            approval_id,
            APPROVAL_SK,
            "ADD emailed :ref",
            {":ref": {"SS": [approver_ref]}},
        )

    def claim_code_attempt(self, approval_id: str, approver_ref: str, limit: int) -> int | None:
        """Count one code attempt of one approver's link, unless it made ``limit`` already
        (one conditional update: see :func:`approval_guards.claim_code_attempt`)."""
        return approval_guards.claim_code_attempt(
            self._client, self._table, _pk(approval_id), approver_ref, limit
        )

    def reissue_links(self, approval_id: str, approver_refs: Sequence[str]) -> Approval | None:
        """Raise a pending approval's link generation; forget its emails, codes and attempts
        (see :func:`approval_guards.reissue_links`). ``None`` unless it is pending."""
        if not approval_guards.reissue_links(
            self._client, self._table, _pk(approval_id), approver_refs
        ):
            if self.get(approval_id) is None:
                raise NotFoundError(f"approval {approval_id} does not exist")
            return None
        return self.get(approval_id)

    def use_view_token(self, approval_id: str, view_id: str) -> bool:
        """Record a page view's token as used (one conditional put); ``False`` if it was."""
        return approval_guards.use_view_token(self._client, self._table, _pk(approval_id), view_id)

    def set_code_hash(self, approval_id: str, approver_ref: str, hashed: str) -> None:
        """Store the keyed hash of an approver's one-time code (never the code)."""
        self._update(
            approval_id,
            SECRET_SK,
            "SET #code = :hash",
            {":hash": {"S": hashed}},
            names={"#code": f"code#{approver_ref}"},
        )

    def _update(
        self,
        approval_id: str,
        sk: str,
        expression: str,
        values: dict[str, Any],
        *,
        names: dict[str, str] | None = None,
        returns: str = "NONE",
    ) -> dict[str, Any]:
        request: dict[str, Any] = {
            "TableName": self._table,
            "Key": {"pk": {"S": _pk(approval_id)}, "sk": {"S": sk}},
            "UpdateExpression": expression,
            "ConditionExpression": "attribute_exists(pk)",
            "ExpressionAttributeValues": values,
            "ReturnValues": returns,
        }
        if names:
            request["ExpressionAttributeNames"] = names
        try:
            return cast(dict[str, Any], self._client.update_item(**request))
        except ClientError as exc:
            if _code(exc) == "ConditionalCheckFailedException":
                raise NotFoundError(f"approval {approval_id} does not exist") from exc
            raise self._storage_error("UpdateItem", exc) from exc

    # ----------------------------------------------------------------------------------------
    # Reads
    # ----------------------------------------------------------------------------------------

    def get(self, approval_id: str) -> Approval | None:
        """The approval, read consistently (``None`` when there is none)."""
        item = self._get_item(approval_id, APPROVAL_SK)
        return None if item is None else self._approval(item)

    def task_token(self, approval_id: str) -> str:
        """The task token the run waits on: read only to resume it, never shown or logged.

        Raises:
            NotFoundError: no such approval.
        """
        item = self._get_item(approval_id, SECRET_SK, projection="task_token")
        token = None if item is None else _s(item, "task_token")
        if token is None:
            raise NotFoundError(f"approval {approval_id} has no stored task token")
        return token

    def code_hash(self, approval_id: str, approver_ref: str) -> str | None:
        """The stored hash of an approver's one-time code (``None`` when none was issued)."""
        name = f"code#{approver_ref}"
        item = self._get_item(approval_id, SECRET_SK, projection="#code", names={"#code": name})
        return None if item is None else _s(item, name)

    def list(
        self, *, pending_only: bool = False, run_id: str | None = None, limit: int = 50
    ) -> list[Approval]:
        """Approvals, newest first (eventually consistent: from the indexes).

        Args:
            pending_only: only those still waiting for a decision.
            run_id: only this run's.
            limit: at most this many (capped at 1000).
        """
        limit = max(1, min(limit, MAX_LIST))
        request = list_query(self._table, pending_only=pending_only, run_id=run_id, limit=limit)
        # The index holds keys only (the runs table's indexes project no body): the keys of
        # the page in index order, then the items by key, 100 at a time.
        keys: list[dict[str, Any]] = []
        for item in self._query(request):
            keys.append({"pk": item["pk"], "sk": item["sk"]})
            if len(keys) >= limit:
                break
        found: list[Approval] = []
        for start in range(0, len(keys), 100):
            page = keys[start : start + 100]
            items = batch_get(self._client.batch_get_item, self._table, page, self._storage_error)
            by_pk = {item["pk"]["S"]: item for item in items}
            found.extend(self._approval(by_pk[k["pk"]["S"]]) for k in page if k["pk"]["S"] in by_pk)
        return found

    # ----------------------------------------------------------------------------------------
    # Audit
    # ----------------------------------------------------------------------------------------

    def append_audit(self, entry: AuditEntry) -> None:
        """Add one line to the approval's audit trail (create-only, never overwritten), chained
        after its run's last line.

        The line and the run's chain head are written in one transaction, the head only if it
        still names the line read as the last: of two writers racing, the loser reads the new
        head and chains after it, so a run's chain never forks.
        """
        found = self._get_item(entry.approval_id, APPROVAL_SK, projection="run_id")
        run_id = found["run_id"]["S"] if found and "run_id" in found else None
        key = {"pk": {"S": f"{CHAIN_PREFIX}{chain_key(entry.approval_id, run_id)}"}}
        key["sk"] = {"S": CHAIN_HEAD_SK}
        for _ in range(CHAIN_ATTEMPTS):
            try:
                head = self._client.get_item(TableName=self._table, Key=key, ConsistentRead=True)
            except ClientError as exc:
                raise self._storage_error("GetItem", exc) from exc
            prev = head.get("Item", {}).get("digest", {}).get("S", GENESIS)
            line = chained(entry, run_id, prev)
            assert line.digest is not None
            sk = f"{AUDIT_PREFIX}{_utc_iso(line.at)}#{self._suffix()}"
            audit_item = {
                "pk": {"S": _audit_pk(line.approval_id)},
                "sk": {"S": sk},
                "body": {"S": line.model_dump_json(exclude_none=True)},
            }
            try:
                self._client.transact_write_items(
                    TransactItems=[
                        {
                            "Put": {
                                "TableName": self._table,
                                "Item": audit_item,
                                "ConditionExpression": ENTRY_IS_NEW,
                            }
                        },
                        {
                            "Put": {
                                "TableName": self._table,
                                "Item": {**key, "digest": {"S": line.digest}},
                                "ConditionExpression": HEAD_UNMOVED,
                                "ExpressionAttributeValues": {":prev": {"S": prev}},
                            }
                        },
                    ]
                )
                return
            except ClientError as exc:
                if _code(exc) not in ("TransactionCanceledException", "TransactionConflict"):
                    raise self._storage_error("TransactWriteItems", exc) from exc
        raise StorageError(
            f"approval {entry.approval_id}: its run's audit chain kept moving; "
            f"no line written after {CHAIN_ATTEMPTS} attempts"
        )

    def audit(self, approval_id: str) -> builtins.list[AuditEntry]:
        """The approval's audit trail, oldest first."""
        # Lines written before audit had its own partition are still under the approval's.
        legacy = approval_votes.prefix_query(self._table, approval_id, AUDIT_PREFIX)
        query = {
            **legacy,
            "ExpressionAttributeValues": {
                ":pk": {"S": _audit_pk(approval_id)},
                ":prefix": {"S": AUDIT_PREFIX},
            },
        }
        items = [*self._query(legacy), *self._query(query)]
        # Sort keys are <prefix><iso time>#<random>: their order is the trail's.
        items.sort(key=lambda i: str(i["sk"]["S"]))
        return [AuditEntry.model_validate_json(i["body"]["S"]) for i in items]

    # ----------------------------------------------------------------------------------------
    # Mapping and plumbing
    # ----------------------------------------------------------------------------------------

    @staticmethod
    def _approval(item: dict[str, Any]) -> Approval:
        return approval_of(item)

    def _get_item(
        self,
        approval_id: str,
        sk: str,
        *,
        projection: str | None = None,
        names: dict[str, str] | None = None,
    ) -> dict[str, Any] | None:
        request: dict[str, Any] = {
            "TableName": self._table,
            "Key": {"pk": {"S": _pk(approval_id)}, "sk": {"S": sk}},
            "ConsistentRead": True,
        }
        if projection:
            request["ProjectionExpression"] = projection
        if names:
            request["ExpressionAttributeNames"] = names
        try:
            response = self._client.get_item(**request)
        except ClientError as exc:
            raise self._storage_error("GetItem", exc) from exc
        return cast(dict[str, Any] | None, response.get("Item"))

    def _query(self, request: dict[str, Any]) -> Iterator[dict[str, Any]]:
        while True:
            try:
                response = self._client.query(**request)
            except ClientError as exc:
                raise self._storage_error("Query", exc) from exc
            yield from response.get("Items", [])
            last = response.get("LastEvaluatedKey")
            if not last:
                return
            request = {**request, "ExclusiveStartKey": last}

    def _storage_error(self, operation: str, exc: ClientError) -> StorageError:
        message = cast(dict[str, Any], exc.response).get("Error", {}).get("Message", "")
        return StorageError(f"DynamoDB {operation} on {self._table} failed: {_code(exc)} {message}")
