"""Parsing a file's bytes into JSON-compatible data: text, lines, JSON, YAML, CSV.

Pure functions (no I/O): ``read_file`` steps fetch the bytes, this module decodes and parses
them. ``yaml`` is imported only when a YAML file is parsed, so it stays off the runner's cold
start (PERFORMANCE.md P3).
"""

from __future__ import annotations

import csv
import io
import json
from typing import Any

from langorch.domain.errors import FileContentError, JsonShapeError, JsonSyntaxError
from langorch.domain.limits import MAX_JSON_DEPTH, json_shape_problem, loads_strict


def file_format(fmt: str, key: str) -> str:
    """The format ``auto`` stands for: by the key's suffix, else text."""
    if fmt != "auto":
        return fmt
    suffix = key.rsplit("/", 1)[-1].rsplit(".", 1)[-1].lower() if "." in key else ""
    return {"json": "json", "yaml": "yaml", "yml": "yaml", "csv": "csv"}.get(suffix, "text")


def parse_content(data: bytes, fmt: str, where: str) -> Any:
    """Decode ``data`` (UTF-8, a leading BOM dropped) and parse it as ``fmt``.

    ``text``: the string; ``lines``: its lines; ``json`` / ``yaml``: the document (YAML dates
    become ISO strings, so the result is JSON); ``csv``: a dict per row keyed by the header
    row, short rows padded with ``""``.

    Args:
        data: The file's bytes.
        fmt: ``text``, ``lines``, ``json``, ``yaml`` or ``csv`` (``auto`` resolved already).
        where: Where the bytes came from, for error messages (``s3://bucket/key``).

    Returns:
        The parsed content.

    Raises:
        FileContentError: bad UTF-8, the parser's complaint with its position, or JSON/YAML
            nested deeper than ``MAX_JSON_DEPTH`` or not strict (NaN, Infinity, a lone
            surrogate) with its path under ``content`` (never the content itself).
    """
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise FileContentError(
            f"{where} is not valid UTF-8 (byte 0x{data[exc.start]:02x} at offset {exc.start}); "
            "save it as UTF-8"
        ) from exc
    if fmt == "text":
        return text
    if fmt == "lines":
        return text.splitlines()
    if fmt == "json":
        return _json(text, where)
    if fmt == "yaml":
        return _yaml(text, where)
    if fmt == "csv":
        return _csv_rows(text, where)
    raise FileContentError(f"{where}: unknown format {fmt!r}")  # pragma: no cover - validated


def shape(value: Any) -> str:
    """What a parsed value looks like, without its content (for the timeline)."""
    if isinstance(value, str):
        return f"text, {len(value)} characters"
    if isinstance(value, list):
        return f"list of {len(value)} items"
    if isinstance(value, dict):
        return f"object with {len(value)} keys"
    return type(value).__name__


def _json(text: str, where: str) -> Any:
    try:
        return loads_strict(text, "content")
    except JsonSyntaxError as exc:
        # The parser's complaint and its position (the message never quotes the content).
        reason = exc.problems[0].message.removeprefix("is not JSON: ")
        raise FileContentError(f"{where} is not valid JSON: {reason}") from None
    except JsonShapeError as exc:
        raise FileContentError(f"{where}: {exc}") from None


def _yaml(text: str, where: str) -> Any:
    import yaml  # only read_file steps on YAML files need it (cold start, PERFORMANCE P3)

    try:
        document = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        at = f" at line {mark.line + 1} column {mark.column + 1}" if mark else ""
        problem = getattr(exc, "problem", None) or type(exc).__name__
        raise FileContentError(f"{where} is not valid YAML: {problem}{at}") from exc
    except RecursionError:
        raise FileContentError(
            f"{where} is nested so deep the YAML parser stopped, far more than "
            f"{MAX_JSON_DEPTH} levels: flatten it"
        ) from None
    # Before the JSON round trip: an alias can make a list that contains itself.
    shape = json_shape_problem(document, "content")
    if shape is not None:
        raise FileContentError(f"{where}: {shape}")
    return json.loads(json.dumps(document, default=str))


def _csv_rows(text: str, where: str) -> list[dict[str, str]]:
    reader = csv.reader(io.StringIO(text, newline=""), strict=True)
    rows: list[dict[str, str]] = []
    try:
        header = next(reader, None)
        if header is None:
            return rows
        for record in reader:
            if not record:
                continue  # a blank line
            if len(record) > len(header):
                raise FileContentError(
                    f"{where} is not valid CSV: line {reader.line_num} has {len(record)} "
                    f"fields, the header has {len(header)}"
                )
            padded = [*record, *[""] * (len(header) - len(record))]
            rows.append(dict(zip(header, padded, strict=True)))
    except csv.Error as exc:
        raise FileContentError(
            f"{where} is not valid CSV: {exc} at line {reader.line_num}"
        ) from exc
    return rows
