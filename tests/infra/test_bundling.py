"""Assets: the code asset layout and the layer's requirements (no build, no network)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

# infra.constructs.bundling is imported in the tests, not here: it loads aws-cdk-lib (a Node
# process, ~9 s of CPU) that collecting this file on a worker that runs no infra test would pay.


def test_code_asset_puts_functions_and_langorch_side_by_side(tmp_path: Path) -> None:
    from infra.constructs.bundling import stage_code

    code = stage_code(tmp_path)
    assert (code / "functions" / "__init__.py").is_file()
    assert (code / "langorch" / "statemachine.asl.json").is_file()
    assert not list(code.rglob("__pycache__"))


def test_code_asset_leaves_out_the_operators_packages(tmp_path: Path) -> None:
    from infra.constructs.bundling import stage_code

    # The CLI, the console and the local stack: no handler can import them (import-linter's
    # layers), and tests/infra/test_layers.py imports every module a handler reaches from
    # this asset.
    code = stage_code(tmp_path)
    assert not {"cli", "console", "local"} & {p.name for p in (code / "langorch").iterdir()}
    assert (code / "langorch" / "composition" / "container.py").is_file()


def test_unbuilt_layer_is_a_placeholder_that_says_how_to_build(tmp_path: Path) -> None:
    from infra.constructs.bundling import stage_layer_placeholder

    layer = stage_layer_placeholder(tmp_path)
    note = (layer / "python" / "LAYER_NOT_BUILT.txt").read_text()
    assert "bundle=true" in note


def test_runner_imports_work_without_the_pruned_numpy_and_zstandard() -> None:
    from infra.constructs.bundling import REPO_ROOT

    # The layer drops numpy and zstandard (P4): the imports the runner needs must not need them.
    # A subprocess, so this test's sys.modules stays clean.
    code = (
        "import sys; sys.modules['numpy'] = None; sys.modules['zstandard'] = None\n"
        "from langchain_aws import ChatBedrockConverse\n"
        "from langchain_openai import ChatOpenAI\n"
        "import langgraph.graph\n"
        "from langgraph_checkpoint_aws.store.dynamodb import DynamoDBStore\n"
        "import langsmith.client, httpx\n"
        "import functions.run_segment.handler\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO_ROOT
    )
    assert result.returncode == 0, result.stderr[-2000:]


def test_pruning_removes_unused_packages_and_keeps_boto3(tmp_path: Path) -> None:
    from infra.constructs.bundling import prune_layer

    for name in ("boto3", "botocore", "numpy", "numpy.libs", "langgraph", "zstandard"):
        (tmp_path / name).mkdir()
    (tmp_path / "numpy-2.3.0.dist-info").mkdir()
    (tmp_path / "zstandard-0.25.0.dist-info").mkdir()
    (tmp_path / "langgraph" / "graph.pyi").write_text("")
    (tmp_path / "langgraph" / "graph.py").write_text("")
    (tmp_path / "langgraph" / "tests").mkdir()
    prune_layer(tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["boto3", "botocore", "langgraph"]
    assert [p.name for p in (tmp_path / "langgraph").iterdir()] == ["graph.py"]
