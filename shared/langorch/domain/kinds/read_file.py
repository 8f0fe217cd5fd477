"""``read_file``: read one object of the files bucket into ``shared_context``."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Literal

from pydantic import Field

from langorch.domain.kinds.base import Settings, StepKind, Template

if TYPE_CHECKING:
    from langorch.domain.definitions import BlockDefinition, PlanStep
    from langorch.domain.lookup import DefinitionLookup

READ_FILE_DEFAULT_BYTES = 262_144
"""``read_file``'s default bound: 256 KiB."""
READ_FILE_MAX_BYTES = 1_048_576
"""``read_file``'s hard bound, 1 MiB: the parsed content lands in the run's checkpointed state."""

ReadFileFormat = Literal["auto", "text", "json", "yaml", "csv", "lines"]


class ReadFileSpec(Settings):
    """Read one object of the files bucket into ``shared_context``.

    The defaults read the file that started the run: an ``s3`` trigger's run input carries
    ``bucket`` and ``key``. Only the deployment's files bucket can be read, never under its
    checkpoint prefix (other runs' state), and never more than ``max_bytes``.

    Formats: ``text`` (a UTF-8 string), ``lines`` (a list of strings), ``json`` / ``yaml`` (the
    parsed document), ``csv`` (a list of dicts keyed by the header row; short rows are padded
    with ``""``, a row longer than the header is an error). ``auto`` picks by the key's suffix:
    ``.json`` json, ``.yaml`` / ``.yml`` yaml, ``.csv`` csv, anything else text.
    """

    bucket: str = "{{ bucket }}"
    """The bucket (a template); it must be the deployment's files bucket."""
    key: str = "{{ key }}"
    """The object key (a template)."""
    format: ReadFileFormat = "auto"
    max_bytes: int = Field(default=READ_FILE_DEFAULT_BYTES, ge=1, le=READ_FILE_MAX_BYTES)
    """A larger object fails the step (it is never read past this bound)."""
    output_key: str | None = None
    """``shared_context`` key that receives the parsed content; default: the first output key
    of the block, else ``<step_id>_content``. The metadata always goes to ``<step_id>_file``."""


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
