"""The lease fence a segment's checkpoint writes carry, and the check that enforces it.

The fence lives on the run item of the runs table (``acquire_lease`` increments it); a fenced
write is a transaction whose first action checks it, with the run items' own condition.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from langorch.adapters.dynamodb._run_items import FENCE_IS_CURRENT, RUN_SK, run_pk


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

    def condition_check(self) -> dict[str, Any]:
        """The ``TransactWriteItems`` action that fails unless the fence is still current."""
        return {
            "ConditionCheck": {
                "TableName": self.runs_table,
                "Key": {"pk": {"S": run_pk(self.run_id)}, "sk": {"S": RUN_SK}},
                "ConditionExpression": FENCE_IS_CURRENT,
                "ExpressionAttributeValues": {":fence": {"N": str(self.value)}},
            }
        }
