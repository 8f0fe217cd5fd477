"""EventBridge event patterns: checked before a workflow is stored, matched where AWS is absent.

A pattern is a JSON object mirroring the events it matches: a key holds either another object
(a nested field) or a non-empty array of matchers, any one of which must match the event's
value there. Supported matchers, as EventBridge documents them:

* an exact value: a string, a number, ``true``/``false`` or ``null``;
* ``{"prefix": "s"}``, ``{"suffix": "s"}``, ``{"equals-ignore-case": "s"}``;
* ``{"anything-but": v | [v, …] | {"prefix": "s"} | {"suffix": "s"}}`` (the field must exist);
* ``{"exists": true|false}`` (``true``: a leaf value is there; ``false``: the field is absent);
* ``{"numeric": [op, n]}`` or ``{"numeric": [op, n, op, n]}`` with ``op`` one of
  ``= < <= > >=``.

An event value that is an array matches when any of its items does (EventBridge's rule).

Hand-written because no well-kept Python library matches EventBridge patterns offline (the
only implementations are AWS's own Java ``event-ruler`` and moto's partial copy inside its
EventBridge backend, which is not a public API). In the cloud EventBridge itself matches; this
module is what ``langorch dev`` delivers with, and what the trigger function re-checks against
the workflow's latest version. Operators it does not know (``wildcard``, ``cidr``, ``$or``)
are refused at validation with a hint, so a pattern stored here means the same in both places.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping
from typing import Any

from langorch.domain.errors import Problem

MAX_PATTERN_DEPTH = 10
"""EventBridge's nesting limit for a pattern's objects."""

NUMERIC_OPERATORS = ("=", "<", "<=", ">", ">=")
_STRING_MATCHERS = ("prefix", "suffix", "equals-ignore-case")
_KNOWN = (*_STRING_MATCHERS, "anything-but", "exists", "numeric")
_HINT = (
    "a pattern maps each field to an array of matchers, e.g. "
    '{"source": ["shop.orders"], "detail": {"total": [{"numeric": [">", 100]}]}}'
)
_MISSING = object()


# --------------------------------------------------------------------------------------------
# Validation
# --------------------------------------------------------------------------------------------


def pattern_problems(pattern: Any, path: str) -> list[Problem]:
    """Every problem with an event pattern, each at its path (``triggers[0].pattern.detail``).

    Args:
        pattern: the pattern as written.
        path: where it sits in the definition.
    """
    if not isinstance(pattern, Mapping) or not pattern:
        return [Problem(path, "an event pattern is a non-empty JSON object", _HINT)]
    return list(_object_problems(pattern, path, 1))


def _object_problems(pattern: Mapping[str, Any], path: str, depth: int) -> Iterator[Problem]:
    if depth > MAX_PATTERN_DEPTH:
        yield Problem(path, f"nests deeper than {MAX_PATTERN_DEPTH} levels (EventBridge's limit)")
        return
    for key, value in pattern.items():
        where = f"{path}.{key}"
        if key.startswith("$"):
            yield Problem(where, f"{key} is not supported", "write one trigger per alternative")
        elif isinstance(value, Mapping):
            if not value:
                yield Problem(where, "an empty object matches nothing", _HINT)
            yield from _object_problems(value, where, depth + 1)
        elif isinstance(value, list):
            if not value:
                yield Problem(where, "an empty array matches nothing", "list at least one value")
            for i, matcher in enumerate(value):
                yield from _matcher_problems(matcher, f"{where}[{i}]")
        else:
            yield Problem(
                where,
                f"{value!r} is neither an array of matchers nor an object",
                f"wrap the value in an array: [{_json(value)}]",
            )


def _matcher_problems(matcher: Any, path: str) -> Iterator[Problem]:
    if matcher is None or isinstance(matcher, str | bool):
        return
    if isinstance(matcher, int | float):
        if not math.isfinite(matcher):
            yield Problem(path, "a number must be finite")
        return
    if not isinstance(matcher, Mapping) or len(matcher) != 1:
        yield Problem(
            path,
            "a matcher is a value or an object with exactly one operator",
            f"use one of {', '.join(_KNOWN)}",
        )
        return
    ((name, arg),) = matcher.items()
    where = f"{path}.{name}"
    if name in _STRING_MATCHERS:
        if not isinstance(arg, str):
            yield Problem(where, f"{name} takes a string, not {_json(arg)}")
    elif name == "exists":
        if not isinstance(arg, bool):
            yield Problem(where, f"exists takes true or false, not {_json(arg)}")
    elif name == "numeric":
        yield from _numeric_problems(arg, where)
    elif name == "anything-but":
        yield from _anything_but_problems(arg, where)
    else:
        yield Problem(
            path, f"{name!r} is not a supported matcher", f"use one of {', '.join(_KNOWN)}"
        )


def _numeric_problems(arg: Any, path: str) -> Iterator[Problem]:
    hint = 'e.g. {"numeric": [">", 0, "<=", 100]}'
    if not isinstance(arg, list) or len(arg) not in (2, 4):
        yield Problem(path, "numeric takes [op, number] or [op, number, op, number]", hint)
        return
    for i in range(0, len(arg), 2):
        op, number = arg[i], arg[i + 1]
        if op not in NUMERIC_OPERATORS:
            yield Problem(f"{path}[{i}]", f"{op!r} is not one of {' '.join(NUMERIC_OPERATORS)}")
        if isinstance(number, bool) or not isinstance(number, int | float):
            yield Problem(f"{path}[{i + 1}]", f"{_json(number)} is not a number", hint)
    if len(arg) == 4 and "=" in (arg[0], arg[2]):
        yield Problem(path, "= cannot be combined with a second comparison", hint)


def _anything_but_problems(arg: Any, path: str) -> Iterator[Problem]:
    if isinstance(arg, Mapping):
        if len(arg) != 1 or next(iter(arg)) not in ("prefix", "suffix"):
            yield Problem(path, "anything-but takes a value, a list, or {prefix|suffix: string}")
        elif not isinstance(next(iter(arg.values())), str):
            yield Problem(path, "anything-but's prefix or suffix is a string")
        return
    values = arg if isinstance(arg, list) else [arg]
    if not values:
        yield Problem(path, "anything-but takes at least one value")
    for value in values:
        if isinstance(value, Mapping | list) or value is None:
            yield Problem(path, f"anything-but cannot hold {_json(value)}", "list plain values")


def _json(value: Any) -> str:
    import json

    try:
        return json.dumps(value)
    except (TypeError, ValueError):
        return repr(value)


# --------------------------------------------------------------------------------------------
# Matching
# --------------------------------------------------------------------------------------------


def matches(pattern: Mapping[str, Any], event: Mapping[str, Any]) -> bool:
    """Whether ``event`` matches ``pattern`` (one checked by :func:`pattern_problems`).

    Every key of the pattern must match: an object key recurses into the event's object, an
    array key needs one of its matchers to match the event's value.
    """
    for key, expected in pattern.items():
        value = event.get(key, _MISSING) if isinstance(event, Mapping) else _MISSING
        if isinstance(expected, Mapping):
            if not isinstance(value, Mapping) or not matches(expected, value):
                return False
        elif not any(_leaf_matches(m, value) for m in expected):
            return False
    return True


def _leaf_matches(matcher: Any, value: Any) -> bool:
    if isinstance(matcher, Mapping) and "exists" in matcher:
        present = value is not _MISSING and not isinstance(value, Mapping)
        return present if matcher["exists"] else value is _MISSING
    if value is _MISSING:
        return False
    if isinstance(value, list):
        return any(_leaf_matches(matcher, item) for item in value)
    if not isinstance(matcher, Mapping):
        return _same(matcher, value)
    ((name, arg),) = matcher.items()
    if name == "numeric":
        return _numeric(arg, value)
    if name == "anything-but":
        return _anything_but(arg, value)
    if not isinstance(value, str):
        return False
    if name == "prefix":
        return value.startswith(arg)
    if name == "suffix":
        return value.endswith(arg)
    return bool(value.casefold() == str(arg).casefold())  # equals-ignore-case


def _same(expected: Any, value: Any) -> bool:
    # JSON types stay apart: true is not 1, "5" is not 5.
    if isinstance(expected, bool) or isinstance(value, bool):
        return isinstance(expected, bool) and isinstance(value, bool) and expected == value
    if _is_number(expected) and _is_number(value):
        return float(expected) == float(value)
    return type(expected) is type(value) and bool(expected == value)


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _numeric(arg: list[Any], value: Any) -> bool:
    if not _is_number(value):
        return False
    compare = {
        "=": lambda a, b: a == b,
        "<": lambda a, b: a < b,
        "<=": lambda a, b: a <= b,
        ">": lambda a, b: a > b,
        ">=": lambda a, b: a >= b,
    }
    return all(compare[arg[i]](float(value), float(arg[i + 1])) for i in range(0, len(arg), 2))


def _anything_but(arg: Any, value: Any) -> bool:
    if isinstance(arg, Mapping):
        ((name, text),) = arg.items()
        if not isinstance(value, str):
            return True
        return not (value.startswith(text) if name == "prefix" else value.endswith(text))
    values = arg if isinstance(arg, list) else [arg]
    return not any(_same(v, value) for v in values)
