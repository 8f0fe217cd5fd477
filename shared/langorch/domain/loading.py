"""Loading block and workflow definitions from JSON or YAML files.

A file holds one block, one workflow, a list of them, or ``{"blocks": [...], "workflows": [...]}``.
A mapping with ``steps`` or ``plan_id`` is a workflow; a mapping with ``block_id`` is a block; a
mapping with ``procedure_id`` or ``workflow_graph`` is a CKP procedure (seed 001), compiled into a
workflow by :mod:`langorch.domain.ckp.compiler` (its warnings are kept beside the definitions).

Loading checks shapes only (the pydantic models); cross-references are checked by
:mod:`langorch.domain.validation`. Every problem of a file is reported at once, each with its path
(``steps[3].branches.yes``) and a hint, in one :class:`~langorch.domain.errors.DefinitionError`.
"""

from __future__ import annotations

import difflib
import json
import types
import typing
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Union

from pydantic import BaseModel, ValidationError

from langorch.domain.ckp import is_procedure
from langorch.domain.definitions import BlockDefinition, TaskPlan
from langorch.domain.errors import DefinitionError, Problem
from langorch.domain.limits import MAX_JSON_DEPTH, json_shape_problem

if TYPE_CHECKING:
    import yaml

Format = Literal["json", "yaml"]

_SUFFIXES: dict[str, Format] = {".json": "json", ".yaml": "yaml", ".yml": "yaml"}
_MAX_INPUT_SHOWN = 60
"""Bound on how much of an offending value a message repeats (values may be long or secret-ish)."""


@dataclass
class LoadedDefinitions:
    """The blocks and workflows of one file, in file order."""

    blocks: list[BlockDefinition] = field(default_factory=list)
    workflows: list[TaskPlan] = field(default_factory=list)
    warnings: list[Problem] = field(default_factory=list)
    """What compiling CKP procedures accepted but flags (unknown fields, ignored settings)."""


def load_file(path: str | Path) -> LoadedDefinitions:
    """Load the blocks and workflows of a ``.json``, ``.yaml`` or ``.yml`` file.

    Args:
        path: The file to read.

    Returns:
        The definitions in the file.

    Raises:
        DefinitionError: The file cannot be read, is malformed, or holds invalid definitions
            (``subject`` is the file path; ``problems`` lists every problem found).
    """
    source = str(path)
    fmt = _SUFFIXES.get(Path(path).suffix.lower())
    if fmt is None:
        raise DefinitionError(
            source,
            [
                Problem(
                    "",
                    f"unsupported file type {Path(path).suffix or '(none)'!r}",
                    "use a .json, .yaml or .yml file",
                )
            ],
        )
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise DefinitionError(
            source, [Problem("", f"cannot read the file: {exc}", "check the path")]
        ) from exc
    return load_text(text, source=source, fmt=fmt)


def load_text(text: str, *, source: str, fmt: Format | None = None) -> LoadedDefinitions:
    """Parse definitions from JSON or YAML text.

    Args:
        text: The document.
        source: Where the text came from (a file path, ``<stdin>``); the error's subject.
        fmt: ``"json"`` or ``"yaml"``; ``None`` guesses: text starting with ``{`` or ``[`` is
            JSON, anything else YAML.

    Returns:
        The definitions in the text.

    Raises:
        DefinitionError: The text is malformed or holds invalid definitions.
    """
    if fmt is None:
        fmt = "json" if text.lstrip().startswith(("{", "[")) else "yaml"
    data: Any
    if fmt == "json":
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise DefinitionError(
                source,
                [
                    Problem(
                        "",
                        f"malformed JSON at line {exc.lineno}, column {exc.colno}: {exc.msg}",
                        "fix the syntax there (a missing comma, quote or bracket is usual)",
                    )
                ],
            ) from exc
        except RecursionError:
            raise DefinitionError(source, [_too_deep()]) from None
    else:
        data = _fast_yaml(text)
        if data is _NOT_FAST:
            data = _pure_yaml(text, source)
    # The stored definition is read back by pydantic, and a trigger's input becomes a run's:
    # the same shape as at every door (the path names the field: workflows[0].triggers[1]…).
    problem = json_shape_problem(data, "")
    if problem is not None:
        raise DefinitionError(source, [problem])
    return parse_definitions(data, source=source)


_NOT_FAST = object()
"""What :func:`_fast_yaml` returns for a document the pure parser must read."""


def _fast_yaml(text: str) -> Any:
    """A good document parsed by LibYAML (ten times faster than the pure parser: most of what
    ``langorch workflows validate`` spent reading a file), else :data:`_NOT_FAST`.

    Only a document LibYAML parses and that has the shape every door takes is read so; for
    anything else the pure parser decides, so bad input is refused as before, with the same
    message (LibYAML words its errors its own way and stops at another depth).
    """
    # Imported here: a JSON file (the README's seed 000) never pays for PyYAML (issue 26).
    import yaml

    loader = getattr(yaml, "CSafeLoader", None)  # absent when PyYAML was built without LibYAML
    if loader is None:
        return _NOT_FAST
    try:
        # The safe loader only: a definition file must never construct Python objects.
        data = yaml.load(text, Loader=loader)  # noqa: S506 - CSafeLoader is the safe loader
    except (yaml.YAMLError, RecursionError):
        return _NOT_FAST
    return data if json_shape_problem(data, "") is None else _NOT_FAST


def _pure_yaml(text: str, source: str) -> Any:
    import yaml

    try:
        # safe_load only: a definition file must never construct Python objects.
        return yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise DefinitionError(source, [_yaml_problem(exc)]) from exc
    except RecursionError:
        raise DefinitionError(source, [_too_deep()]) from None


def _too_deep() -> Problem:
    return Problem(
        "",
        f"the document is nested so deep the parser stopped, far more than {MAX_JSON_DEPTH} levels",
        f"flatten it: at most {MAX_JSON_DEPTH} levels of objects and lists",
    )


def parse_definitions(data: Any, *, source: str) -> LoadedDefinitions:
    """Turn parsed JSON/YAML data into blocks and workflows.

    Args:
        data: One block or workflow mapping, a list of them, or a mapping with ``blocks`` and/or
            ``workflows`` lists.
        source: Where the data came from; the error's subject.

    Returns:
        The definitions.

    Raises:
        DefinitionError: With every problem of the data, each with its path.
    """
    problems: list[Problem] = []
    loaded = LoadedDefinitions()
    if isinstance(data, dict) and _is_container(data):
        for key in sorted(set(data) - {"blocks", "workflows"}):
            problems.append(
                Problem(
                    str(key),
                    f"unknown top-level field {key!r}",
                    "a file of several definitions has only 'blocks' and 'workflows'",
                )
            )
        for key, model in (("blocks", BlockDefinition), ("workflows", TaskPlan)):
            items = data.get(key, [])
            if not isinstance(items, list):
                problems.append(
                    Problem(key, f"must be a list, got {_type_name(items)}", f"write {key}: [...]")
                )
                continue
            for i, item in enumerate(items):
                _parse_one(item, f"{key}[{i}]", model, loaded, problems)
    elif isinstance(data, list):
        if not data:
            problems.append(Problem("", "the list is empty", "add a block or a workflow"))
        for i, item in enumerate(data):
            _parse_one(item, f"[{i}]", None, loaded, problems)
    elif data is None:
        problems.append(Problem("", "the document is empty", "add a block or a workflow"))
    else:
        _parse_one(data, "", None, loaded, problems)
    problems.extend(_duplicates(loaded))
    if problems:
        raise DefinitionError(source, problems)
    return loaded


def _is_container(data: dict[Any, Any]) -> bool:
    """A ``{"blocks": …, "workflows": …}`` document rather than one definition."""
    if "block_id" in data or "plan_id" in data or "steps" in data:
        return False
    return "blocks" in data or "workflows" in data


def _parse_one(
    item: Any,
    prefix: str,
    model: type[BlockDefinition] | type[TaskPlan] | None,
    loaded: LoadedDefinitions,
    problems: list[Problem],
) -> None:
    """Validate one definition into ``loaded`` or add its problems."""
    if not isinstance(item, dict):
        problems.append(
            Problem(
                prefix,
                f"expected a block or workflow mapping, got {_type_name(item)}",
                "a block has block_id; a workflow has plan_id and steps",
            )
        )
        return
    if is_procedure(item) and model is not BlockDefinition:
        _compile_one(item, prefix, loaded, problems)
        return
    if model is None:
        if "steps" in item or "plan_id" in item:
            model = TaskPlan
        elif "block_id" in item:
            model = BlockDefinition
        else:
            problems.append(
                Problem(
                    prefix,
                    "neither a block, a workflow nor a CKP procedure",
                    "a block has block_id; a workflow has plan_id and steps; a CKP procedure "
                    "has procedure_id and workflow_graph",
                )
            )
            return
    try:
        parsed = model.model_validate(item)
    except ValidationError as exc:
        problems.extend(pydantic_problems(exc, model, prefix=prefix))
        return
    if isinstance(parsed, TaskPlan):
        loaded.workflows.append(parsed)
    else:
        loaded.blocks.append(parsed)


def _compile_one(
    item: dict[str, Any], prefix: str, loaded: LoadedDefinitions, problems: list[Problem]
) -> None:
    """Compile one CKP procedure into ``loaded`` or add its problems (paths under ``prefix``)."""
    from langorch.domain.ckp.compiler import compile_procedure

    try:
        compiled = compile_procedure(item)
    except DefinitionError as exc:
        problems.extend(_prefixed(prefix, p) for p in exc.problems)
        return
    loaded.workflows.append(compiled.plan)
    loaded.warnings.extend(_prefixed(prefix, p) for p in compiled.warnings)


def _prefixed(prefix: str, problem: Problem) -> Problem:
    if not prefix:
        return problem
    path = f"{prefix}.{problem.path}" if problem.path else prefix
    return Problem(path, problem.message, problem.hint)


def _duplicates(loaded: LoadedDefinitions) -> Iterable[Problem]:
    """The same id twice in one file is ambiguous: which one should be stored?"""
    seen: set[str] = set()
    for block in loaded.blocks:
        if block.block_id in seen:
            yield Problem(
                "",
                f"block {block.block_id!r} is defined more than once",
                "keep one definition per block id in a file",
            )
        seen.add(block.block_id)
    seen = set()
    for plan in loaded.workflows:
        if plan.plan_id in seen:
            yield Problem(
                "",
                f"workflow {plan.plan_id!r} is defined more than once",
                "keep one definition per plan id in a file",
            )
        seen.add(plan.plan_id)


def _yaml_problem(exc: yaml.YAMLError) -> Problem:
    mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
    what = getattr(exc, "problem", None) or str(exc)
    where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
    return Problem(
        "",
        f"malformed YAML{where}: {what}",
        "fix the syntax there (indentation and unquoted ':' or '{' are usual causes)",
    )


# --------------------------------------------------------------------------------------------
# Pydantic errors -> problems
# --------------------------------------------------------------------------------------------


def pydantic_problems(
    exc: ValidationError, model: type[BaseModel], *, prefix: str = ""
) -> list[Problem]:
    """One problem per pydantic error, with a path like ``steps[3].branches.yes`` and a hint.

    Errors of the members of a union (``seconds: int | str``) are merged into one problem.

    Args:
        exc: The validation error.
        model: The model that was validated (to name the allowed fields in hints).
        prefix: Path of the validated value inside the document (``blocks[1]``).

    Returns:
        The problems, in pydantic's order.
    """
    merged: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for error in exc.errors():
        path = _resolve(model, error["loc"], prefix)
        kind = "type" if error["type"] in _TYPE_ERRORS else error["type"]
        # extra_forbidden's loc ends at the unknown field: its owner is the model one level up.
        owner = _owner_of_last(model, error["loc"])
        merged.setdefault((path, kind), []).append({**error, "_owner": owner})
    return [_problem(path, errors) for (path, _), errors in merged.items()]


_TYPE_ERRORS = frozenset(
    {
        "int_type",
        "int_parsing",
        "int_from_float",
        "float_type",
        "float_parsing",
        "string_type",
        "bool_type",
        "bool_parsing",
        "list_type",
        "dict_type",
        "model_type",
        "none_required",
        "literal_error",
        "enum",
    }
)


def _problem(path: str, errors: list[dict[str, Any]]) -> Problem:
    first = errors[0]
    kind: str = first["type"]
    given = _shown(first.get("input"))
    name = path.rsplit(".", 1)[-1] if path else "value"
    if kind == "missing":
        return Problem(path, f"required field {name!r} is missing", "add it")
    if kind == "extra_forbidden":
        owner: type[BaseModel] | None = first["_owner"]
        allowed = sorted(owner.model_fields) if owner is not None else []
        close = difflib.get_close_matches(name, allowed, n=1)
        hint = "remove it, or check the spelling"
        if close:
            hint += f" (did you mean {close[0]!r}?)"
        if allowed:
            hint += f"; allowed fields are {', '.join(allowed)}"
        return Problem(path, f"unknown field {name!r}", hint)
    if kind == "string_pattern_mismatch":
        return Problem(
            path,
            f"{given} is not a valid identifier",
            "start with a letter, then letters, digits, '_' or '-' (at most 128 characters)",
        )
    if kind in ("literal_error", "enum"):
        return Problem(
            path, f"{_lower_first(first['msg'])}, got {given}", "use one of those values"
        )
    if kind in _TYPE_ERRORS:
        messages = list(dict.fromkeys(_lower_first(e["msg"]) for e in errors))
        return Problem(path, f"{' or '.join(messages)}, got {given}", "change the value's type")
    return Problem(path, f"{_lower_first(first['msg'])} (got {given})", "change the value")


def _resolve(model: type[BaseModel], loc: tuple[int | str, ...], prefix: str) -> str:
    """A readable path for a pydantic ``loc``: ints become ``[i]``, names ``.name``.

    Walks the model's annotations so that union member tags pydantic puts into ``loc``
    (``wait.seconds.int``) are left out of the path rather than shown as fields.
    """
    path = prefix
    current: Any = model
    for part in loc:
        current = _unwrap_optional(current)
        if isinstance(part, int):
            path += f"[{part}]"
            current = _item_type(current)
            continue
        if _is_union(current):
            # The tag of the union member that failed: not a place in the document.
            current = Any
            continue
        if isinstance(current, type) and issubclass(current, BaseModel):
            info = current.model_fields.get(part)
            current = info.annotation if info is not None else Any
        elif typing.get_origin(current) is dict and typing.get_args(current):
            current = typing.get_args(current)[1]
        else:
            current = Any
        path = f"{path}.{part}" if path else part
    return path


def _owner_of_last(model: type[BaseModel], loc: tuple[int | str, ...]) -> type[BaseModel] | None:
    current: Any = model
    for part in loc[:-1]:
        current = _unwrap_optional(current)
        if isinstance(part, int):
            current = _item_type(current)
        elif isinstance(current, type) and issubclass(current, BaseModel):
            info = current.model_fields.get(part)
            current = info.annotation if info is not None else Any
        elif typing.get_origin(current) is dict and typing.get_args(current):
            current = typing.get_args(current)[1]
        else:
            return None
    current = _unwrap_optional(current)
    return current if isinstance(current, type) and issubclass(current, BaseModel) else None


def _is_union(tp: Any) -> bool:
    return typing.get_origin(tp) in (Union, types.UnionType)


def _unwrap_optional(tp: Any) -> Any:
    """``X | None`` -> ``X``; other unions are kept."""
    if _is_union(tp):
        members = [a for a in typing.get_args(tp) if a is not type(None)]
        if len(members) == 1:
            return members[0]
    return tp


def _item_type(tp: Any) -> Any:
    if typing.get_origin(tp) in (list, tuple) and typing.get_args(tp):
        return typing.get_args(tp)[0]
    return Any


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= _MAX_INPUT_SHOWN else text[: _MAX_INPUT_SHOWN - 3] + "..."


def _lower_first(text: str) -> str:
    return text[:1].lower() + text[1:]


def _type_name(value: Any) -> str:
    names = {dict: "a mapping", list: "a list", str: "a string", type(None): "nothing"}
    return names.get(type(value), type(value).__name__)
