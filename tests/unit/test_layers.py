"""The layers are enforced by import-linter (``[tool.importlinter]`` in pyproject.toml, run by
``make lint``): the package keeps them, and an import that breaks one is caught."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.lock import REPO_ROOT

pytestmark = pytest.mark.subprocess


def _lint_imports(root: Path) -> subprocess.CompletedProcess[str]:
    lint = Path(sys.executable).with_name("lint-imports")
    environment = {**os.environ, "PYTHONPATH": f"{root / 'shared'}{os.pathsep}{root}"}
    return subprocess.run(
        [str(lint), "--no-cache", "--config", str(REPO_ROOT / "pyproject.toml")],
        capture_output=True,
        text=True,
        cwd=root,
        env=environment,
    )


@pytest.fixture(scope="module")
def scratch(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copy of the package and handlers to break imports in."""
    root = tmp_path_factory.mktemp("layers")
    ignore = shutil.ignore_patterns("__pycache__")
    shutil.copytree(REPO_ROOT / "shared" / "langorch", root / "shared" / "langorch", ignore=ignore)
    shutil.copytree(REPO_ROOT / "functions", root / "functions", ignore=ignore)
    return root


def _with_module(scratch: Path, module: str, source: str) -> Path:
    path = scratch / "shared" / Path(*module.split(".")).with_suffix(".py")
    path.write_text(source, encoding="utf-8")
    return path


def test_the_package_keeps_every_contract(scratch: Path) -> None:
    result = _lint_imports(scratch)
    assert result.returncode == 0, result.stdout[-3000:]
    assert "0 broken" in result.stdout


@pytest.mark.parametrize(
    ("module", "source", "broken"),
    [
        # a use-case reaching for an adapter
        (
            "langorch.app.scratch_usecase",
            "from langorch.adapters.dynamodb.runs import RunsRepository\n",
            "langorch.app is not allowed to import langorch.adapters",
        ),
        # the domain reaching up to the engine, even only for a type
        (
            "langorch.domain.scratch_rule",
            "from typing import TYPE_CHECKING\n"
            "if TYPE_CHECKING:\n    from langorch.engine.state import OrchestrationState\n",
            "langorch.domain is not allowed to import langorch.engine",
        ),
        # an LLM provider importing AWS client code from the adapters
        (
            "langorch.llm.scratch_provider",
            "def client():\n    from langorch.adapters.aws import make_client\n",
            "langorch.llm is not allowed to import langorch.adapters",
        ),
    ],
)
def test_an_import_across_a_layer_is_caught(
    scratch: Path, module: str, source: str, broken: str
) -> None:
    path = _with_module(scratch, module, source)
    try:
        result = _lint_imports(scratch)
    finally:
        path.unlink()
    assert result.returncode != 0
    assert broken in result.stdout


def test_a_cycle_between_two_modules_of_a_package_is_caught(scratch: Path) -> None:
    first = _with_module(scratch, "langorch.domain.cyc_a", "import langorch.domain.cyc_b\n")
    second = _with_module(scratch, "langorch.domain.cyc_b", "import langorch.domain.cyc_a\n")
    try:
        result = _lint_imports(scratch)
    finally:
        first.unlink()
        second.unlink()
    assert result.returncode != 0
    assert "No cycles are allowed in langorch.domain" in result.stdout
