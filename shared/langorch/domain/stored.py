"""What a definitions store returns, whichever store it is (DynamoDB, the local SQLite file,
the fake): a stored version with its metadata.

Kept apart from :mod:`langorch.adapters.dynamodb.definitions` so the local store and the CLI's
listings read them without importing botocore (issue 26: a command in 0.3 s), and in the domain
so the ports can name it (``WorkflowSource.stored_workflows``).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Generic, Literal, TypeVar

from langorch.domain.definitions import BlockDefinition, TaskPlan

Kind = Literal["block", "workflow"]
KINDS: tuple[Kind, ...] = ("block", "workflow")

_DefinitionT = TypeVar("_DefinitionT", BlockDefinition, TaskPlan)


@dataclass(frozen=True)
class StoredDefinition(Generic[_DefinitionT]):
    """A stored version with the metadata the store keeps beside it."""

    kind: Kind
    id: str
    version: int
    content_hash: str
    created_at: datetime
    definition: _DefinitionT
    active_version: int | None = None
    """The definition's active version, where the read knew it (listings, the active read)."""
