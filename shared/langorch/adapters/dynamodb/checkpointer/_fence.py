"""The lease fence a segment's checkpoint writes carry, and the check that enforces it.

The fence lives on the run item of the runs table (``acquire_lease`` increments it); a fenced
write is a transaction whose first action checks it, with the run items' own condition. A
checkpoint's write also checks that no operator's pause stands on the run item (its ``pause``
attribute): the segment learns of a pause from the write it makes anyway, instead of reading
the run item at every step boundary.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from langorch.adapters.dynamodb._run_items import FENCE_IS_CURRENT, RUN_SK, run_pk

NOT_PAUSED = "attribute_not_exists(pause)"
"""No operator's pause stands on the run item (``RunsRepository.request_pause`` sets it)."""


@dataclass(frozen=True)
class Fence:
    """A lease's fencing token: writes land only while the run item's ``fence`` equals it.

    Attributes:
        runs_table: the runs table, where the run item (``pk``/``sk``) carries the fence.
        run_id: the run (its checkpoints' thread id).
        value: the fence its segment got from ``acquire_lease``.
    """

    runs_table: str
    run_id: str
    value: int

    def condition_check(self, *, unpaused: bool = False) -> dict[str, Any]:
        """The ``TransactWriteItems`` action that fails unless the fence is still current
        (and, with ``unpaused``, no pause stands on the run)."""
        condition = f"{FENCE_IS_CURRENT} AND {NOT_PAUSED}" if unpaused else FENCE_IS_CURRENT
        return {
            "ConditionCheck": {
                "TableName": self.runs_table,
                "Key": {"pk": {"S": run_pk(self.run_id)}, "sk": {"S": RUN_SK}},
                "ConditionExpression": condition,
                "ExpressionAttributeValues": {":fence": {"N": str(self.value)}},
            }
        }
