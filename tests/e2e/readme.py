"""The README's copy-paste commands, as a shell would split them."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
README = REPO / "README.md"


def bash_commands(text: str | None = None) -> list[list[str]]:
    """Every command of the README's ```bash blocks, split like a shell does, comments dropped.

    Lines continued with a backslash are joined; blank and comment-only lines are skipped.
    """
    text = README.read_text(encoding="utf-8") if text is None else text
    commands: list[list[str]] = []
    for block in re.findall(r"```bash\n(.*?)```", text, re.DOTALL):
        for line in block.replace("\\\n", " ").splitlines():
            argv = shlex.split(line, comments=True)
            if argv:
                commands.append(argv)
    return commands


def langorch_commands(prefix: tuple[str, ...] = ()) -> list[list[str]]:
    """The README's ``langorch …`` commands (arguments after ``langorch``) starting with
    ``prefix``."""
    return [
        argv[1:]
        for argv in bash_commands()
        if argv[0] == "langorch" and tuple(argv[1 : 1 + len(prefix)]) == prefix
    ]


def definition_snippets(section: str) -> list[str]:
    """The ```yaml blocks of one ``## section`` of the README (its subsections included)."""
    text = README.read_text(encoding="utf-8")
    start = text.index(f"\n## {section}\n")
    end = text.find("\n## ", start + 1)
    body = text[start : end if end != -1 else len(text)]
    return re.findall(r"```yaml\n(.*?)```", body, re.DOTALL)
