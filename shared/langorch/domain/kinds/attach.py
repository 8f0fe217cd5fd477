"""``attach``: keep files the run produced or downloaded with the run, as artifacts.

Each file has a name (a template) and exactly one source:

- ``content``: a template, rendered (a report the run writes);
- ``from``: a ``shared_context`` key whose value is the file (a string as it is, anything else
  as JSON): an earlier step's answer, an ``http`` step's response;
- ``key``: an object of the files bucket (a template; the folder bucket locally), such as the
  file that started the run (``{{ key }}``); never under the checkpoint prefix;
- ``url``: an ``http(s)`` URL to download (a template), at most 10 MiB.

Where artifacts live, what is recorded of each, how long they are kept and how they are
listed: :mod:`langorch.domain.artifacts`.

```yaml
- step_id: keep
  kind: attach
  depends_on: [summarize]
  settings:
    files:
      - {name: "summary-{{ run_id }}.md", content: "# Summary\\n\\n{{ summary }}"}
      - {name: order.json, from: order_response}
      - {name: received.csv, key: "{{ key }}"}
      - {name: invoice.pdf, url: "{{ invoice_url }}", content_type: application/pdf}
```
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Literal

from pydantic import Field

from langorch.domain.artifacts import name_problem
from langorch.domain.errors import Problem
from langorch.domain.kinds.base import Read, StepCheck, StepKind, Template, root_key
from langorch.domain.step_settings import Settings

if TYPE_CHECKING:
    from langorch.domain.definitions import BlockDefinition, PlanStep
    from langorch.domain.lookup import DefinitionLookup

Source = Literal["content", "from", "key", "url"]
SOURCES: tuple[Source, ...] = ("content", "from", "key", "url")

SOURCE_HINT = (
    "give exactly one of: content (a template: the file's text), from (a shared_context key, "
    'e.g. an http step\'s response), key (an object of the files bucket, e.g. "{{ key }}") or '
    "url (an http(s) URL to download)"
)

MAX_FILES = 20
"""Files one ``attach`` step may keep."""


class AttachFile(Settings):
    """One file: its name and where its bytes come from (exactly one source)."""

    name: str = Field(min_length=1)
    """The file name, a template (``report-{{ run_id }}.md``); one path segment."""
    content: str | None = None
    """The file's text, a template."""
    from_key: str | None = Field(default=None, alias="from")
    """A ``shared_context`` key whose value is the file."""
    key: str | None = None
    """An object of the files bucket, a template."""
    url: str | None = None
    """An ``http(s)`` URL to download, a template."""
    content_type: str | None = None
    """The media type; default: a download's ``Content-Type``, else guessed from the name."""

    def sources(self) -> list[tuple[Source, str]]:
        """The sources given, as ``(source, value)``; valid settings have exactly one."""
        given = {"content": self.content, "from": self.from_key, "key": self.key, "url": self.url}
        return [(s, v) for s in SOURCES if (v := given[s]) is not None]

    def source(self) -> tuple[Source, str]:
        """The file's one source.

        Raises:
            ValueError: none or several (validation reports that before anything runs).
        """
        found = self.sources()
        if len(found) != 1:
            raise ValueError(SOURCE_HINT)
        return found[0]


class AttachSettings(Settings):
    """The files an ``attach`` step keeps."""

    files: list[AttachFile] = Field(min_length=1, max_length=MAX_FILES)


class AttachKind(StepKind):
    """Attach files to the run; writes ``<step_id>_artifacts`` (one record per file)."""

    name = "attach"
    settings_model = AttachSettings
    settings_required = True

    def check_step(self, c: StepCheck) -> Iterator[Problem]:
        """The settings' shape, then each file: one source, a URL that is http(s), a literal
        name that names one file, no name twice."""
        problems = list(super().check_step(c))
        yield from problems
        spec = self.valid_settings(c.step, c.block) if not problems else None
        if spec is None:
            return
        seen: dict[str, int] = {}
        for i, file in enumerate(spec.files):
            yield from _file_problems(f"{c.path}.settings.files[{i}]", file, seen, i)

    def step_templates(
        self, step: PlanStep, block: BlockDefinition | None, path: str
    ) -> Iterator[Template]:
        """Each file's name, and its content, key or url."""
        spec = self.valid_settings(step, block)
        if spec is None:
            return
        for i, file in enumerate(spec.files):
            at = f"{path}.settings.files[{i}]"
            yield f"{at}.name", file.name, "template"
            for source, value in file.sources():
                if source != "from":
                    yield f"{at}.{source}", value, "template"

    def reads(self, step: PlanStep, block: BlockDefinition | None, path: str) -> Iterator[Read]:
        """The keys files come ``from``."""
        spec = self.valid_settings(step, block)
        if spec is None:
            return
        for i, file in enumerate(spec.files):
            if file.from_key is not None:
                yield f"{path}.settings.files[{i}].from", root_key(file.from_key), "attaches"

    def outputs(
        self, step_id: str, step: PlanStep, block: BlockDefinition | None, lookup: DefinitionLookup
    ) -> set[str]:
        """``<step_id>_artifacts``."""
        return super().outputs(step_id, step, block, lookup) | {f"{step_id}_artifacts"}


def _file_problems(path: str, file: AttachFile, seen: dict[str, int], i: int) -> Iterator[Problem]:
    sources = file.sources()
    if len(sources) != 1:
        named = ", ".join(s for s, _ in sources)
        yield Problem(
            path,
            f"a file needs one source, this one has {named or 'none'}",
            SOURCE_HINT,
        )
    for source, value in sources:
        literal_start = value.split("{{", 1)[0].split("{%", 1)[0]
        if source == "url" and literal_start and not _could_be_http(literal_start):
            yield Problem(
                f"{path}.url",
                f"{value[:80]!r} is not an http(s) URL",
                "download over http:// or https://; a file of the files bucket is key:, "
                "a value of the run is from:",
            )
        if source in ("from", "key") and not value.strip():
            yield Problem(f"{path}.{source}", f"{source} is empty", SOURCE_HINT)
    if "{{" not in file.name and "{%" not in file.name:
        problem = name_problem(file.name)
        if problem:
            yield Problem(
                f"{path}.name",
                f"{file.name[:80]!r} {problem}",
                "name the file with one path segment: report.md, invoice-{{ run_id }}.pdf",
            )
        elif file.name in seen:
            yield Problem(
                f"{path}.name",
                f"files[{seen[file.name]}] is named {file.name!r} too",
                "give each file its own name (the second would replace the first)",
            )
        seen.setdefault(file.name, i)


def _could_be_http(start: str) -> bool:
    """Whether a URL's literal start can still be ``http://`` or ``https://``."""
    lowered = start.lower()
    return any(
        lowered.startswith(scheme) or scheme.startswith(lowered)
        for scheme in ("http://", "https://")
    )


KINDS = (AttachKind(),)
