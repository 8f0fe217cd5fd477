"""What each Lambda function's code can import, read from the source (``ast``), for the layers.

A handler's modules are followed through every ``import`` (module level and inside functions,
``if TYPE_CHECKING:`` blocks left out). The container (``langorch.composition.container``)
imports each adapter inside the property that builds it, so it is followed only into the
properties the handler's use-cases reach (``aws_calls.handler_uses``, the derivation the IAM
grants are checked with, and as blind: a plain ``@property`` of the container handed on is not
seen) and the container methods those call; for the runner, which has every layer, into all of
them. The walk stops at the runner's own code
(:data:`RUNNER_CODE`) for a function without the runner's layer: that a function reaches none
of it through its imports and its container properties is checked separately and exactly
(:func:`load_time_modules`).
"""

from __future__ import annotations

import ast
import sys
from collections.abc import Iterable
from functools import cache
from pathlib import Path

from tests.infra.aws_calls import REPO, handler_uses, parsed, wrapped_uses

ROOTS = {"langorch": REPO / "shared" / "langorch", "functions": REPO / "functions"}
CONTAINER = "langorch.composition.container"
CLOUD_NEVER = ("langorch.composition.embedded",)
"""Built only when ``local_home`` is set (the embedded stores), never in a Lambda sandbox."""
RUNNER_CODE = (
    "langorch.engine",
    "langorch.adapters.dynamodb.checkpointer",
    "langorch.adapters.dynamodb.memory",
    "langorch.adapters.mcp",
    "langorch.adapters.otel",
    "langorch.llm.openai",
    "langorch.llm.anthropic",
    "langorch.llm.bedrock",
    "langorch.llm.embeddings",
)
"""The engine, the stores LangGraph writes through, the tool and trace SDKs' adapters and the
LLM providers: what needs the runner's layer."""


def module_path(name: str) -> Path | None:
    """The file of one of our modules (``None``: not ours)."""
    top, *rest = name.split(".")
    if top not in ROOTS:
        return None
    base = ROOTS[top].joinpath(*rest)
    if (base / "__init__.py").is_file():
        return base / "__init__.py"
    return base.with_suffix(".py") if base.with_suffix(".py").is_file() else None


def _type_checking(node: ast.AST) -> bool:
    return isinstance(node, ast.If) and ast.unparse(node.test) in (
        "TYPE_CHECKING",
        "typing.TYPE_CHECKING",
    )


def _nodes(node: ast.AST, *, into_functions: bool = True) -> Iterable[ast.AST]:
    """``node``'s descendants, without ``if TYPE_CHECKING:`` bodies (and, unless
    ``into_functions``, without function bodies: what importing the module runs)."""
    for child in ast.iter_child_nodes(node):
        if _type_checking(child):
            for other in child.orelse:  # type: ignore[attr-defined]
                yield other
                yield from _nodes(other, into_functions=into_functions)
            continue
        if not into_functions and isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        yield child
        yield from _nodes(child, into_functions=into_functions)


def _imported(nodes: Iterable[ast.AST], module: str) -> set[str]:
    """Absolute names of the modules ``nodes`` import (``from a import b``: ``a``, and
    ``a.b`` when it is one of our modules)."""
    package = module if module_path(module) and module_path(module).name == "__init__.py" else ""  # type: ignore[union-attr]
    found: set[str] = set()
    for node in nodes:
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            name = node.module or ""
            if node.level:
                parts = (package or module.rpartition(".")[0]).split(".")
                parts = parts[: len(parts) - node.level + 1]
                name = ".".join([*parts, *([node.module] if node.module else [])])
            found.add(name)
            found |= {f"{name}.{a.name}" for a in node.names if module_path(f"{name}.{a.name}")}
    return found


@cache
def _tree(module: str) -> ast.Module:
    path = module_path(module)
    assert path is not None, module
    return parsed(path)


def _parents(module: str) -> set[str]:
    parts = module.split(".")
    return {".".join(parts[:i]) for i in range(1, len(parts))}


def _imports(module: str, *, into_functions: bool) -> set[str]:
    """What ``module`` imports (the container: only at module level; its properties import
    their adapters, followed per property by :func:`container_modules`)."""
    inner = into_functions and module != CONTAINER
    found = _imported(_nodes(_tree(module), into_functions=inner), module) | _parents(module)
    return found - set(CLOUD_NEVER)


def _members() -> dict[str, ast.FunctionDef]:
    container = next(
        n for n in _tree(CONTAINER).body if isinstance(n, ast.ClassDef) and n.name == "Container"
    )
    return {n.name: n for n in container.body if isinstance(n, ast.FunctionDef)}


def container_modules(properties: Iterable[str]) -> set[str]:
    """The modules the container imports to build ``properties`` (and the container methods
    and properties they use in turn: ``self._slack_client``, ``self.checkpointer``)."""
    members = _members()
    seen: set[str] = set()
    found: set[str] = set()
    pending = ["client", *properties]  # every property builds its clients with client()
    while pending:
        name = pending.pop()
        if name in seen or name not in members:
            continue
        seen.add(name)
        body = list(_nodes(members[name]))
        found |= _imported(body, CONTAINER)
        pending += [
            n.attr
            for n in body
            if isinstance(n, ast.Attribute)
            and isinstance(n.value, ast.Name)
            and n.value.id == "self"
        ]
    return found


def _handler(function: str) -> str:
    return f"functions.{function}.handler"


def container_properties(function: str, *, runner: bool = False) -> set[str]:
    """The container properties ``functions/<function>``'s use-cases reach (``runner``: all)."""
    if runner:
        return set(_members())
    uses = wrapped_uses(handler_uses(REPO / "functions" / function / "handler.py"))
    return {prop for prop, _ in uses}


def _closure(starts: Iterable[str], *, into_functions: bool, stop: tuple[str, ...]) -> set[str]:
    seen: set[str] = set()
    pending = list(starts)
    while pending:
        module = pending.pop()
        if module in seen or module_path(module) is None or _under(module, stop):
            continue
        seen.add(module)
        pending += _imports(module, into_functions=into_functions)
    return seen


def _under(module: str, packages: tuple[str, ...]) -> bool:
    return any(module == p or module.startswith(p + ".") for p in packages)


def load_time_modules(function: str) -> set[str]:
    """Our modules a function loads: importing its handler, and building the container
    properties its use-cases reach — exact, no function body followed (but the container's)."""
    starts = {_handler(function), *container_modules(container_properties(function))}
    return _closure(starts, into_functions=False, stop=())


def reachable_modules(function: str, *, runner: bool) -> set[str]:
    """Every module of ours the function's code can import, following imports inside
    functions too; without the runner's layer (``runner`` false) the walk stops at
    :data:`RUNNER_CODE`."""
    properties = container_properties(function, runner=runner)
    starts = {_handler(function), *container_modules(properties)}
    return _closure(starts, into_functions=True, stop=() if runner else RUNNER_CODE)


def runner_code_in(modules: Iterable[str]) -> set[str]:
    """The modules of ``modules`` that are the runner's own code."""
    return {m for m in modules if _under(m, RUNNER_CODE)}


def third_party(module: str, *, in_functions: bool) -> set[str]:
    """Top-level names of the third-party packages ``module`` imports: at module level, or
    (``in_functions``) only inside its functions."""
    everything = _imported(_nodes(_tree(module)), module)
    at_load = _imported(_nodes(_tree(module), into_functions=False), module)
    names = (everything - at_load) if in_functions else at_load
    return {
        n.split(".")[0]
        for n in names
        if module_path(n) is None
        and n.split(".")[0] not in ROOTS
        and n.split(".")[0] not in sys.stdlib_module_names
        and n != "__future__"
    }
