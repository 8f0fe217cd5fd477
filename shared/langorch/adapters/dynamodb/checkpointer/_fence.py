"""The lease fence a segment's checkpoint writes carry, and the error when it no longer holds.

The fence lives on the run item of the runs table (``acquire_lease`` increments it). A fenced
write never reads it: it takes the next free slot of the thread (``..checkpoint_slots``), and a
newer lease's marker in that slot is what refuses it. Only a segment that finds no marker of its
own fence (the run's first lease writes none) reads the run item's fence, once.
"""

from __future__ import annotations

from dataclasses import dataclass

from langorch.domain.errors import LeaseLostError


@dataclass(frozen=True)
class Fence:
    """A lease's fencing token: writes land only while no newer lease has claimed a slot.

    Attributes:
        run_id: the run (its checkpoints' thread id).
        value: the fence its segment got from ``acquire_lease``.
    """

    run_id: str
    value: int

    def lost(self, why: str) -> LeaseLostError:
        """The error of a write refused because this fence no longer holds the run."""
        return LeaseLostError(
            f"run {self.run_id}: this segment's lease (fence {self.value}) was taken over by "
            f"another segment ({why}); its checkpoint write was refused and nothing was written "
            "(the newer segment carries the run on)"
        )
