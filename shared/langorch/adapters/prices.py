"""Reads the deployment's configuration files: the price file (``LANGORCH_PRICES_FILE``:
``provider/model`` to prices) and the tool-policy file (``LANGORCH_TOOL_POLICIES_FILE``: the
deployment's tool-call rules). JSON, or YAML for a ``.yaml``/``.yml`` file.

The price file replaces the shipped prices it names (:mod:`langorch.domain.prices`); a
workflow's ``prices:`` then replaces the file's. The deployment's rules weigh with a tool
server's and a workflow's, the strictest winning (:mod:`langorch.domain.tool_policies`).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from langorch.domain.errors import DefinitionError, Problem
from langorch.domain.prices import TokenPrice, parse_prices
from langorch.domain.tool_policies import ToolPolicy, parse_policies


def read_prices(path: str | Path) -> dict[str, TokenPrice]:
    """The prices in the file at ``path``.

    Raises:
        DefinitionError: the file is missing, does not parse, or names a bad key or price
            (every problem, each with its key).
    """
    subject = f"price file {Path(path)}"
    return parse_prices(_read(path, subject, "LANGORCH_PRICES_FILE"), where=subject)


def read_tool_policies(path: str | Path) -> list[ToolPolicy]:
    """The deployment's tool-call rules in the file at ``path`` (a list of rules, or
    ``{tool_policies: [...]}``).

    Raises:
        DefinitionError: the file is missing, does not parse, or a rule is wrong (every
            problem, each with its path).
    """
    subject = f"tool-policy file {Path(path)}"
    return parse_policies(_read(path, subject, "LANGORCH_TOOL_POLICIES_FILE"), subject)


def _read(path: str | Path, subject: str, setting: str) -> Any:
    where = Path(path)
    try:
        text = where.read_text(encoding="utf-8")
    except OSError as exc:
        raise DefinitionError(
            subject, [Problem("", f"cannot be read: {exc.strerror}", f"set {setting} to a file")]
        ) from exc
    try:
        if where.suffix in (".yaml", ".yml"):
            import yaml  # only when a YAML file is set

            return yaml.safe_load(text)
        return json.loads(text)
    except ValueError as exc:  # yaml.YAMLError is not one; caught below
        raise DefinitionError(
            subject, [Problem("", f"is not valid JSON: {exc}", "fix the syntax")]
        ) from exc
    except Exception as exc:
        raise DefinitionError(
            subject, [Problem("", f"is not valid YAML: {exc}", "fix the syntax")]
        ) from exc
