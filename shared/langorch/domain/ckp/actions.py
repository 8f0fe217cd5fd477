"""The CKP action catalog and the generic actions langorch performs itself.

Seed 001 §3.3 groups a sequence step's ``action`` by channel (generic, desktop, web, email, api,
database, file). An action runs on one of three executors, chosen when the procedure is compiled
and again when the step runs (:mod:`langorch.domain.ckp.binding`): a registered **agent** that
lists it, a **built-in** action of this module, or an **MCP tool** of a registered tool server
(``server.tool``).

The built-in actions are generic: they need no agent. ``wait``, ``http_request`` and
``read_file`` do I/O and run in the engine (``engine/kinds/sequence.py``); the others are pure
functions of their parameters and the run's variables, here.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any

from langorch.domain.errors import LangorchError
from langorch.domain.fileformats import parse_content
from langorch.domain.templates import evaluate

CATALOG: Mapping[str, tuple[str, ...]] = {
    "generic": (
        "wait", "screenshot", "log", "set_checkpoint", "restore_checkpoint", "set_variable",
        "append_to_array", "calculate", "format_string", "extract_regex", "parse_json",
        "parse_csv", "notify",
    ),
    "desktop": (
        "launch_app", "activate_window", "wait_for_window", "wait_for_dialog", "click", "type",
        "press_key", "press_keys", "copy_to_clipboard", "paste_from_clipboard",
        "select_all_results", "click_cell", "read_excel_file", "close_window",
        "maximize_window", "minimize_window",
    ),
    "web": (
        "navigate", "wait_for_element", "click", "type", "clear", "extract_table_data",
        "wait_for_text", "scroll_to_element", "take_screenshot", "execute_javascript",
        "switch_frame", "switch_window", "upload_file", "download_file",
    ),
    "email": (
        "compose_email", "send_email", "read_email", "search_email", "download_attachment",
    ),
    "api": ("http_request", "graphql_query", "soap_request", "websocket_connect"),
    "database": (
        "execute_query", "execute_procedure", "bulk_insert", "bulk_update", "transaction_begin",
        "transaction_commit", "transaction_rollback", "backup_data", "restore_data",
    ),
    "file": (
        "read_file", "write_file", "delete_file", "move_file", "copy_file", "list_directory",
        "create_directory", "zip_files", "unzip_files",
    ),
    "transform": ("filter", "map", "sort", "deduplicate", "aggregate"),
}  # fmt: skip
"""Seed 001's action catalog by channel (the syntax reference's, plus the generic processing
operations and the transform node's operations)."""

KNOWN_ACTIONS = frozenset(action for actions in CATALOG.values() for action in actions)
"""Every action of the catalog."""

ENGINE_ACTIONS = frozenset({"wait", "http_request", "read_file"})
"""Built-in actions that do I/O: the engine runs them."""

PURE_ACTIONS = frozenset(
    {
        "log", "set_variable", "append_to_array", "calculate", "format_string",
        "extract_regex", "parse_json", "parse_csv", "filter", "map", "sort", "deduplicate",
        "aggregate",
    }
)  # fmt: skip
"""Built-in actions that only compute: functions of this module."""

BUILTIN_ACTIONS = ENGINE_ACTIONS | PURE_ACTIONS
"""What langorch performs itself, without an agent or a tool."""

MAX_WAIT_MS = 600_000
"""The longest ``wait`` inside a step: ten minutes (a segment runs at most fifteen). Longer
waits park the run instead: split the node and wait between them with a ``wait`` step."""

AGGREGATES = ("sum", "count", "min", "max", "avg")


class ActionError(LangorchError):
    """A built-in action was given parameters it cannot work with."""

    retryable = False
    """The same parameters fail the same way on another attempt."""


def channel_of(action: str) -> str | None:
    """The first channel whose catalog lists ``action`` (``None``: not in the catalog)."""
    return next((name for name, actions in CATALOG.items() if action in actions), None)


def run_pure(action: str, params: Mapping[str, Any], scope: Mapping[str, Any]) -> Any:
    """Perform a pure built-in action.

    Args:
        action: One of :data:`PURE_ACTIONS`.
        params: The step's parameters, rendered (expression parameters left as written).
        scope: The variables the step sees (for ``filter``, ``map`` and ``calculate``).

    Returns:
        The action's result (what the step's ``output_variable`` receives).

    Raises:
        ActionError: a parameter is missing or of the wrong type, with the fix.
        TemplateError: an expression failed.
    """
    return _PURE[action](params, scope)


def _value(params: Mapping[str, Any], *names: str) -> Any:
    for name in names:
        if name in params:
            return params[name]
    raise ActionError(f"needs one of the parameters {', '.join(names)}")


def _text(params: Mapping[str, Any], *names: str) -> str:
    value = _value(params, *names)
    if not isinstance(value, str):
        raise ActionError(f"{names[0]} must be text, got {type(value).__name__}")
    return value


def _items(params: Mapping[str, Any], scope: Mapping[str, Any]) -> list[Any]:
    source = _value(params, "source_variable", "source", "array", "value")
    if isinstance(source, str) and source in scope:
        source = scope[source]
    if not isinstance(source, list):
        raise ActionError(
            f"the source must be a list, got {type(source).__name__}; name a list variable in "
            "source_variable"
        )
    return source


def _log(params: Mapping[str, Any], scope: Mapping[str, Any]) -> Any:
    return {
        "level": str(params.get("level") or "INFO").upper(),
        "message": str(_value(params, "message", "value", "text")),
    }


def _set_variable(params: Mapping[str, Any], scope: Mapping[str, Any]) -> Any:
    return _value(params, "value")


def _append(params: Mapping[str, Any], scope: Mapping[str, Any]) -> Any:
    name = _text(params, "array")
    current = scope.get(name) or []
    if not isinstance(current, list):
        raise ActionError(f"{name!r} holds {type(current).__name__}, not a list")
    return [*current, _value(params, "value")]


def _calculate(params: Mapping[str, Any], scope: Mapping[str, Any]) -> Any:
    return evaluate(_text(params, "expression"), dict(scope))


def _format(params: Mapping[str, Any], scope: Mapping[str, Any]) -> Any:
    return str(_value(params, "template", "value", "message", "text"))


def _regex(params: Mapping[str, Any], scope: Mapping[str, Any]) -> Any:
    pattern, source = _text(params, "pattern"), _value(params, "source", "value", "text")
    try:
        match = re.search(pattern, str(source))
    except re.error as exc:
        raise ActionError(f"pattern {pattern!r} is not a regular expression: {exc}") from exc
    if match is None:
        return None
    return match.group(1) if match.groups() else match.group(0)


def _parse_json(params: Mapping[str, Any], scope: Mapping[str, Any]) -> Any:
    source = _value(params, "source", "value", "text")
    if not isinstance(source, str):
        return source  # already a value (a step's structured output)
    return parse_content(source.encode("utf-8"), "json", "parse_json's source")


def _parse_csv(params: Mapping[str, Any], scope: Mapping[str, Any]) -> Any:
    source = _text(params, "source", "value", "text")
    return parse_content(source.encode("utf-8"), "csv", "parse_csv's source")


def _per_item(params: Mapping[str, Any], scope: Mapping[str, Any], item: Any) -> Any:
    name = str(params.get("item_variable") or "item")
    return evaluate(_text(params, "expression", "condition"), {**scope, name: item})


def _filter(params: Mapping[str, Any], scope: Mapping[str, Any]) -> Any:
    return [item for item in _items(params, scope) if _per_item(params, scope, item)]


def _map(params: Mapping[str, Any], scope: Mapping[str, Any]) -> Any:
    source = params.get("source_variable", params.get("source"))
    value = scope.get(source) if isinstance(source, str) else source
    if not isinstance(value, list):
        # A map over one value (``risk_assessment.risk_score``) computes it once.
        return evaluate(_text(params, "expression"), dict(scope))
    return [_per_item(params, scope, item) for item in value]


def _field(item: Any, key: str | None) -> Any:
    if key is None:
        return item
    return item.get(key) if isinstance(item, dict) else None


def _sort(params: Mapping[str, Any], scope: Mapping[str, Any]) -> Any:
    options = params.get("params") or {}
    key = options.get("key") or params.get("key")
    items = _items(params, scope)
    try:
        return sorted(
            items, key=lambda i: _field(i, key), reverse=bool(options.get("reverse", False))
        )
    except TypeError as exc:
        raise ActionError(f"cannot sort these items by {key!r}: {exc}") from exc


def _deduplicate(params: Mapping[str, Any], scope: Mapping[str, Any]) -> Any:
    options = params.get("params") or {}
    key = options.get("key") or params.get("key")
    seen: list[Any] = []
    kept = []
    for item in _items(params, scope):
        marker = _field(item, key)
        if marker not in seen:
            seen.append(marker)
            kept.append(item)
    return kept


def _aggregate(params: Mapping[str, Any], scope: Mapping[str, Any]) -> Any:
    options = params.get("params") or {}
    function = str(options.get("function") or params.get("function") or "count")
    key = options.get("field") or params.get("field")
    values = [_field(item, key) for item in _items(params, scope)]
    if function == "count":
        return len(values)
    numbers = [v for v in values if isinstance(v, int | float) and not isinstance(v, bool)]
    if function not in AGGREGATES:
        raise ActionError(f"aggregate function {function!r} is not one of {AGGREGATES}")
    if not numbers:
        return 0 if function == "sum" else None
    if function == "sum":
        return sum(numbers)
    if function == "min":
        return min(numbers)
    if function == "max":
        return max(numbers)
    return sum(numbers) / len(numbers)


_PURE: dict[str, Callable[[Mapping[str, Any], Mapping[str, Any]], Any]] = {
    "log": _log,
    "set_variable": _set_variable,
    "append_to_array": _append,
    "calculate": _calculate,
    "format_string": _format,
    "extract_regex": _regex,
    "parse_json": _parse_json,
    "parse_csv": _parse_csv,
    "filter": _filter,
    "map": _map,
    "sort": _sort,
    "deduplicate": _deduplicate,
    "aggregate": _aggregate,
}
