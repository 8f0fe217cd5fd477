"""The lease fence a segment's checkpoint writes carry, and the check that enforces it.

The fence lives on the run item of the runs table (``acquire_lease`` increments it) and, copied
by the same transaction, on the run's small fence item beside it: a fenced write is a
transaction whose first action checks the fence item (a check bills the size of the item it
reads: two write units here, where the run item, with the run's input and outputs, bills two
per KB). A checkpoint's write also checks that the fence item carries no ``paused`` flag (set
by ``RunsRepository.request_pause``): the segment learns of an operator's pause from the write
it makes anyway, instead of reading the run item at every step boundary.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from langorch.adapters.dynamodb._run_items import FENCE_IS_CURRENT, FENCE_SK, PAUSED_FLAG, run_pk

NOT_PAUSED = f"attribute_not_exists({PAUSED_FLAG})"
"""No operator's pause is flagged on the fence item (``RunsRepository.request_pause``)."""


@dataclass(frozen=True)
class Fence:
    """A lease's fencing token: writes land only while the run's ``fence`` equals it.

    Attributes:
        runs_table: the runs table, where the run's fence item (``pk``/``sk``) carries it.
        run_id: the run (its checkpoints' thread id).
        value: the fence its segment got from ``acquire_lease``.
    """

    runs_table: str
    run_id: str
    value: int

    def condition_check(self, *, unpaused: bool = False) -> dict[str, Any]:
        """The ``TransactWriteItems`` action that fails unless the fence is still current
        (and, with ``unpaused``, no pause is flagged on the run)."""
        condition = f"{FENCE_IS_CURRENT} AND {NOT_PAUSED}" if unpaused else FENCE_IS_CURRENT
        return {
            "ConditionCheck": {
                "TableName": self.runs_table,
                "Key": {"pk": {"S": run_pk(self.run_id)}, "sk": {"S": FENCE_SK}},
                "ConditionExpression": condition,
                "ExpressionAttributeValues": {":fence": {"N": str(self.value)}},
            }
        }
