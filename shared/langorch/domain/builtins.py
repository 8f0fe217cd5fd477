"""The built-in blocks every deployment registers (seed 000's pre-seeded system blocks).

They live in ``langorch/builtins/blocks.yaml``, packaged with langorch, so they are data like any
other block: listed, shown and referenced by ``block_id`` the same way. What is read is
``blocks.json``, generated from it (``tests/unit/test_builtins.py`` checks that they agree): every
command that checks a workflow reads the built-ins, and parsing YAML (PyYAML's import) cost
``workflows validate`` of a JSON file a tenth of its instructions (issue 26).
"""

from __future__ import annotations

from functools import lru_cache
from importlib import resources

from langorch.domain.definitions import BlockDefinition
from langorch.domain.loading import load_text

_RESOURCE = "builtins/blocks.json"


def builtin_blocks() -> list[BlockDefinition]:
    """The built-in blocks, in file order.

    Returns:
        Fresh copies: callers may change them without affecting later calls.

    Raises:
        DefinitionError: The packaged file is broken (a packaging bug, never user input).
    """
    return [block.model_copy(deep=True) for block in _load()]


def builtin_block_ids() -> frozenset[str]:
    """The ids of the built-in blocks."""
    return frozenset(block.block_id for block in _load())


@lru_cache(maxsize=1)
def _load() -> tuple[BlockDefinition, ...]:
    # Read once per process: Lambda containers reuse it across invocations.
    text = resources.files("langorch").joinpath(_RESOURCE).read_text(encoding="utf-8")
    return tuple(load_text(text, source=f"langorch/{_RESOURCE}", fmt="json").blocks)
