"""Recorded side effects of steps (seed 001 §5) in the runs table, in the run's partition.

Layout (the runs table's ``pk``/``sk``)::

    pk            sk                                              attributes
    ------------  ----------------------------------------------  ------------------------------
    run#<run_id>  task#<step_id>#<visit:06d>#<attempt:03d>#<i:04d>  kind, fingerprint, body (JSON),
                                                                    call_state, call_key

A step's visit reads every attempt's records with one ``Query`` (``begins_with`` the visit's
prefix) and writes each new record with one ``PutItem``; a tool call's ``done`` record replaces
its ``started`` one (same key). Items written before calls had states have no ``call_state``:
they are done. The ``task#`` prefix keeps them apart from the run item and the timeline pages
(``ev#``). Bodies are bounded by the recorder (:mod:`langorch.app.tasks`) before they get here.
"""

from __future__ import annotations

import json
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from langorch.adapters.dynamodb._run_items import run_pk
from langorch.domain.errors import StorageError
from langorch.domain.tasks import TaskRecord

TASK_PREFIX = "task#"


def visit_prefix(step_id: str, visit: int) -> str:
    """The sort-key prefix of every record of one visit of a step."""
    return f"{TASK_PREFIX}{step_id}#{visit:06d}#"


def task_sk(record: TaskRecord) -> str:
    """The sort key of one record."""
    return f"{visit_prefix(record.step_id, record.visit)}{record.attempt:03d}#{record.index:04d}"


class TasksRepository:
    """Recorded tasks in the runs table; satisfies ``TaskStore``.

    Args:
        client: a boto3 DynamoDB client (low-level).
        table_name: the runs table.
    """

    def __init__(self, client: Any, table_name: str) -> None:
        self._client = client
        self._table = table_name

    def load(self, run_id: str, step_id: str, visit: int) -> list[TaskRecord]:
        """Every record of this visit of the step, all attempts, in key order."""
        request: dict[str, Any] = {
            "TableName": self._table,
            "KeyConditionExpression": "pk = :pk AND begins_with(sk, :prefix)",
            "ExpressionAttributeValues": {
                ":pk": {"S": run_pk(run_id)},
                ":prefix": {"S": visit_prefix(step_id, visit)},
            },
            "ConsistentRead": True,
        }
        records: list[TaskRecord] = []
        while True:
            try:
                response = self._client.query(**request)
            except (ClientError, BotoCoreError) as exc:
                raise StorageError(f"cannot read the tasks of run {run_id}") from exc
            records += [_record(item, step_id, visit) for item in response.get("Items", [])]
            last = response.get("LastEvaluatedKey")
            if not last:
                return records
            request["ExclusiveStartKey"] = last

    def put(self, run_id: str, record: TaskRecord) -> None:
        """Store one record (a record with the same key is replaced)."""
        item = {
            "pk": {"S": run_pk(run_id)},
            "sk": {"S": task_sk(record)},
            "kind": {"S": record.kind},
            "fingerprint": {"S": record.fingerprint},
            "body": {"S": json.dumps(record.result, sort_keys=True, default=str)},
            # Not "state": a reserved word in DynamoDB expressions.
            "call_state": {"S": record.state},
        }
        if record.key:
            item["call_key"] = {"S": record.key}
        try:
            self._client.put_item(TableName=self._table, Item=item)
        except (ClientError, BotoCoreError) as exc:
            raise StorageError(f"cannot record a task of run {run_id}") from exc


def _record(item: dict[str, Any], step_id: str, visit: int) -> TaskRecord:
    attempt, index = item["sk"]["S"].rsplit("#", 2)[1:]
    return TaskRecord(
        step_id=step_id,
        visit=visit,
        attempt=int(attempt),
        index=int(index),
        kind=item["kind"]["S"],
        fingerprint=item["fingerprint"]["S"],
        result=json.loads(item["body"]["S"]),
        state="started" if item.get("call_state", {}).get("S") == "started" else "done",
        key=item.get("call_key", {}).get("S", ""),
    )
