"""What a definitions store returns, whichever store it is (DynamoDB, the local SQLite file,
the fake): a stored version with its metadata.

Kept apart from :mod:`langorch.adapters.dynamodb.definitions` so the local store and the CLI's
listings read them without importing botocore (issue 26: a command in 0.3 s), and in the domain
so the ports can name it (``WorkflowSource.stored_workflows``). It imports no definition model
at run time: a listing reads :class:`StoredBody` (the stored JSON, not parsed), and building the
models' pydantic schemas would be most of its cost (issue 26).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any, Generic, Literal, TypeVar

if TYPE_CHECKING:
    from langorch.domain.definitions import BlockDefinition, TaskPlan

Kind = Literal["block", "workflow"]
KINDS: tuple[Kind, ...] = ("block", "workflow")

_DefinitionT = TypeVar("_DefinitionT", "BlockDefinition", "TaskPlan")


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


@dataclass(frozen=True)
class StoredBody:
    """A stored version as the store keeps it: the same metadata as :class:`StoredDefinition`,
    and the definition as its stored JSON object, not parsed into its model.

    For listings that show a few fields of many definitions (``langorch blocks list``,
    ``workflows list``): reading them needs no definition model. The body is the model's JSON
    dump as it was stored: a field added to the model since is absent (read its default).
    """

    kind: Kind
    id: str
    version: int
    content_hash: str
    created_at: datetime
    body: dict[str, Any]
    active_version: int | None = None
    """The definition's active version (as :attr:`StoredDefinition.active_version`)."""
