"""The package's import graph: no cycles, and the use-cases never import the local dev stack.

Every import counts — module level, inside functions, and under ``TYPE_CHECKING`` — because
each is a dependency a reader follows and a refactoring has to untangle.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import langorch

PACKAGE = Path(langorch.__file__).resolve().parent


def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _modules() -> dict[str, Path]:
    return {_module_name(path): path for path in PACKAGE.rglob("*.py")}


def _imports(name: str, path: Path, known: set[str]) -> Iterator[str]:
    """The langorch modules ``name`` imports (a name imported from a package that is itself a
    module counts as that module)."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")
                anchor = anchor[: len(anchor) - (node.level - 1)]
                base = ".".join([*anchor, base] if base else anchor)
            submodules = [f"{base}.{alias.name}" for alias in node.names]
            targets = [m for m in submodules if m in known] or [base]
        else:
            continue
        yield from (target for target in targets if target in known and target != name)


def import_graph() -> dict[str, set[str]]:
    """Module -> the langorch modules it imports."""
    modules = _modules()
    known = set(modules)
    return {name: set(_imports(name, path, known)) for name, path in modules.items()}


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(graph.get(node, ())):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component: list[str] = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_the_package_has_no_import_cycle() -> None:
    found = cycles(import_graph())
    assert not found, f"import cycles in shared/langorch (break each with a port): {found}"


def test_the_use_cases_never_import_the_local_stack() -> None:
    # The composition root picks implementations from settings; the dev stack is not one of
    # the production root's dependencies.
    graph = import_graph()
    offending = sorted(
        f"{module} -> {target}"
        for module, targets in graph.items()
        if module.startswith("langorch.app")
        for target in targets
        if target.startswith("langorch.local")
    )
    assert not offending, f"langorch.app imports langorch.local: {offending}"


def test_the_walker_sees_cycles_and_every_kind_of_import() -> None:
    # A graph with a lazy import inside a function and one under TYPE_CHECKING.
    tree = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert cycles(tree) == [["a", "b", "c"]]
    graph = import_graph()
    assert "langorch.domain.errors" in graph["langorch.app.runs"]  # module level
    assert "langorch.engine.segments" in graph["langorch.app.runs"]  # inside a function
    assert "langorch.domain.runs" in graph["langorch.app.ports"]  # under TYPE_CHECKING
