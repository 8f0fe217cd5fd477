"""moto is used as published: nothing outside the one table in ``langorch.local.emulator``
assigns into a moto module or class (production code, tests and benches alike)."""

from __future__ import annotations

import ast

from tests.support.lock import REPO_ROOT

PATCH_TABLE = REPO_ROOT / "shared" / "langorch" / "local" / "emulator.py"
SEARCHED = ("shared", "functions", "tests", "bench", "infra")


def _moto_names(tree: ast.Module) -> set[str]:
    """Local names bound to a moto module or to something imported from one."""
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "moto":
            names |= {alias.asname or alias.name for alias in node.names}
        elif isinstance(node, ast.Import):
            names |= {
                (alias.asname or alias.name).split(".")[0]
                for alias in node.names
                if alias.name.split(".")[0] == "moto"
            }
    return names


def _root(node: ast.expr) -> str | None:
    while isinstance(node, ast.Attribute):
        node = node.value
    return node.id if isinstance(node, ast.Name) else None


def moto_assignments(source: str) -> list[int]:
    """Line numbers where ``source`` assigns into a moto module or class."""
    if "moto" not in source:
        return []  # names no moto module: nothing to parse (most files; parsing costs CPU)
    tree = ast.parse(source)
    moto = _moto_names(tree)
    found: list[int] = []
    for node in ast.walk(tree):
        targets: list[ast.expr] = []
        if isinstance(node, ast.Assign):
            targets = node.targets
        elif isinstance(node, ast.AugAssign | ast.AnnAssign):
            targets = [node.target]
        elif isinstance(node, ast.Call) and node.args:
            callee = node.func
            name = callee.attr if isinstance(callee, ast.Attribute) else getattr(callee, "id", "")
            if name in ("setattr", "delattr"):
                first = node.args[0]
                named = isinstance(first, ast.Constant) and str(first.value).startswith("moto.")
                if named or _root(first) in moto:
                    found.append(node.lineno)
        found += [t.lineno for t in targets if isinstance(t, ast.Attribute) and _root(t) in moto]
    return found


def test_nothing_assigns_into_moto_outside_the_patch_table() -> None:
    offending = {
        str(path.relative_to(REPO_ROOT)): lines
        for folder in SEARCHED
        for path in sorted((REPO_ROOT / folder).rglob("*.py"))
        if path != PATCH_TABLE and (lines := moto_assignments(path.read_text(encoding="utf-8")))
    }
    assert offending == {}, "assign into moto only in langorch/local/emulator.py's table"


def test_the_check_sees_each_way_of_patching() -> None:
    # The check itself: a module attribute, a class attribute, setattr and a dotted string
    source = (
        "import moto.core\n"
        "from moto.stepfunctions.parser.backend.execution import Execution\n"
        "moto.core.thing = 1\n"
        "Execution.stop = None\n"
        "setattr(Execution, 'stop', None)\n"
        "monkeypatch.setattr('moto.core.models.x', 1)\n"
        "other.stop = None\n"
    )
    assert moto_assignments(source) == [3, 4, 5, 6]


def test_the_table_module_holds_the_patches_it_lists() -> None:
    assert moto_assignments(PATCH_TABLE.read_text(encoding="utf-8")) != []
