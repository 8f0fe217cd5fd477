"""Reads a price file (``LANGORCH_PRICES_FILE``): JSON or YAML, ``provider/model`` to prices.

The file replaces the shipped prices it names (:mod:`langorch.domain.prices`); a workflow's
``prices:`` then replaces the file's.
"""

from __future__ import annotations

import json
from pathlib import Path

from langorch.domain.errors import DefinitionError, Problem
from langorch.domain.prices import TokenPrice, parse_prices


def read_prices(path: str | Path) -> dict[str, TokenPrice]:
    """The prices in the file at ``path`` (``.yaml``/``.yml``: YAML, else JSON).

    Raises:
        DefinitionError: the file is missing, does not parse, or names a bad key or price
            (every problem, each with its key).
    """
    where = Path(path)
    try:
        text = where.read_text(encoding="utf-8")
    except OSError as exc:
        raise DefinitionError(
            f"price file {where}",
            [Problem("", f"cannot be read: {exc.strerror}", "set LANGORCH_PRICES_FILE to a file")],
        ) from exc
    try:
        if where.suffix in (".yaml", ".yml"):
            import yaml  # only when a YAML price file is set

            data = yaml.safe_load(text)
        else:
            data = json.loads(text)
    except ValueError as exc:  # yaml.YAMLError is not one; caught below
        raise DefinitionError(
            f"price file {where}", [Problem("", f"is not valid JSON: {exc}", "fix the syntax")]
        ) from exc
    except Exception as exc:
        raise DefinitionError(
            f"price file {where}", [Problem("", f"is not valid YAML: {exc}", "fix the syntax")]
        ) from exc
    return parse_prices(data, where=f"price file {where}")
