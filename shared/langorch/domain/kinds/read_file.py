"""``read_file``: read one object of the files bucket into ``shared_context``."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from langorch.domain.kinds.base import StepKind, Template
from langorch.domain.step_settings import (
    ReadFileSpec,
)

if TYPE_CHECKING:
    from langorch.domain.definitions import BlockDefinition, PlanStep
    from langorch.domain.lookup import DefinitionLookup


def read_file_settings(step: PlanStep, block: BlockDefinition | None) -> ReadFileSpec:
    """The step's ``read_file`` settings, else its block's, else the defaults."""
    return step.read_file or (block.read_file if block else None) or ReadFileSpec()


def _templates(path: str, spec: ReadFileSpec) -> Iterator[Template]:
    yield f"{path}.bucket", spec.bucket, "template"
    yield f"{path}.key", spec.key, "template"


class ReadFileKind(StepKind):
    """Read a file of the files bucket, parsed by its format."""

    name = "read_file"
    step_fields = frozenset({"read_file"})
    block_fields = frozenset({"read_file"})

    def step_templates(
        self, step: PlanStep, block: BlockDefinition | None, path: str
    ) -> Iterator[Template]:
        """Bucket and key; an inline step's defaults read ``{{ bucket }}`` and ``{{ key }}``."""
        read = step.read_file
        if read is None and block is None:
            read = ReadFileSpec()
        if read is not None:
            yield from _templates(f"{path}.read_file", read)

    def outputs(
        self, step_id: str, step: PlanStep, block: BlockDefinition | None, lookup: DefinitionLookup
    ) -> set[str]:
        """``<step_id>_file`` (metadata) and the content's key."""
        keys = super().outputs(step_id, step, block, lookup) | {f"{step_id}_file"}
        read = read_file_settings(step, block)
        if read.output_key:
            keys.add(read.output_key)
        elif not (block and block.output_keys):
            keys.add(f"{step_id}_content")
        return keys

    def block_templates(self, block: BlockDefinition) -> Iterator[Template]:
        """Without settings the block reads the run's ``{{ bucket }}`` / ``{{ key }}``: inputs."""
        yield from _templates("read_file", block.read_file or ReadFileSpec())


KINDS = (ReadFileKind(),)
