"""Assets: the code asset layout and the layer's requirements (no build, no network)."""

from __future__ import annotations

from pathlib import Path

from infra.constructs.bundling import layer_requirements, stage_code, stage_layer_placeholder


def test_layer_requirements_are_the_runtime_deps_and_llm_extras_without_boto3() -> None:
    names = {
        r.split(">")[0].split("=")[0].split("[")[0].split("<")[0] for r in layer_requirements()
    }
    assert {"langgraph", "langgraph-checkpoint-aws", "aws-lambda-powertools"} <= names
    assert {"langchain-aws", "langchain-openai"} <= names
    assert "boto3" not in names
    assert "moto" not in names  # local mode only


def test_code_asset_puts_functions_and_langorch_side_by_side(tmp_path: Path) -> None:
    code = stage_code(tmp_path)
    assert (code / "functions" / "__init__.py").is_file()
    assert (code / "langorch" / "statemachine.asl.json").is_file()
    assert not list(code.rglob("__pycache__"))


def test_unbuilt_layer_is_a_placeholder_that_says_how_to_build(tmp_path: Path) -> None:
    layer = stage_layer_placeholder(tmp_path)
    note = (layer / "python" / "LAYER_NOT_BUILT.txt").read_text()
    assert "bundle=true" in note
