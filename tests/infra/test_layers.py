"""Each function's code imports with only its own dependency layers (P4: a bundle per function).

The layers' requirement sets (``infra/constructs/bundling.py``, exported from ``uv.lock``) are
installed for this machine's Python from uv's cache, offline, into directories of their own,
pruned and compiled to sourceless byte code as the deploy finishes them; a fresh interpreter
with no site-packages (``-I -S``) then imports every module of ours the function's code can
reach (``tests/infra/layer_imports.py``) with the code asset and those directories alone on
its path. Imports inside functions, which
that does not run, are checked against the installed layers' top-level names.
"""

from __future__ import annotations

import subprocess
import sys
import tomllib
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

import pytest

from tests.infra.layer_imports import (
    load_time_modules,
    reachable_modules,
    runner_code_in,
    third_party,
)
from tests.infra.test_functions import LAYERS

pytestmark = pytest.mark.subprocess

HANDLERS = {
    "trigger": "trigger",
    "run-segment": "run_segment",
    "request-approval": "request_approval",
    "approval-callback": "approval_callback",
}
WITHOUT_THE_RUNNER = [name for name, layers in LAYERS.items() if "runner" not in layers]
BUILT_ONLY_IN_THE_RUNNER = {("langorch.llm.builtin_tools", "langchain_core")}
"""Imports inside functions that only the runner's code calls: the LangChain tools a step's
model is given (``StepToolbox``, an LLM step's)."""
OPTIONAL = {
    "openai": ({"openai", "langchain_openai"}, {"langorch.llm.openai"}),
    "anthropic": ({"anthropic", "langchain_anthropic"}, {"langorch.llm.anthropic"}),
    "otel": ({"opentelemetry"}, {"langorch.adapters.otel"}),
    "tools": ({"mcp", "mcp_types"}, {"langorch.adapters.mcp", "langorch.adapters._mcp_http"}),
}
"""Per option a deployment may leave out of the runner's layer: the SDKs (imported inside
functions, failing with a message that names the setting) and the modules that are only its
adapter (built only when the option is on: ``Container.traces``, ``tool_connector``)."""


LIBRARY_ENTRY_POINTS = (
    "from langchain_aws import ChatBedrockConverse\n"
    "from langchain_openai import ChatOpenAI\n"
    "import langgraph.graph\n"
    "from langgraph_checkpoint_aws.store.dynamodb import DynamoDBStore\n"
    "import langsmith.client, httpx\n"
)
"""What the runner builds from its libraries (chat models, the graph, the memory store, the
HTTP client), imported outright: the layer prunes numpy and zstandard (``PRUNED``), which
langchain-aws and langsmith require but these import without."""

Installer = Callable[[str, tuple[str, ...], bool], Path]


@pytest.fixture(scope="module")
def bundling() -> ModuleType:
    """``infra.constructs.bundling``, imported when a test runs: it imports aws-cdk-lib, which
    starts a Node process, and every pytest worker collects this file."""
    from infra.constructs import bundling

    return bundling


@pytest.fixture(scope="module")
def install(tmp_path_factory: pytest.TempPathFactory, bundling: ModuleType) -> Installer:
    """Install one layer's requirement set (for the given runner extras and tools) into a
    directory of its own, once per module and distinct set: the base layer is the same set
    whatever the extras and tools, so one install serves every test (and the bytecode its
    first importer caches serves the next)."""
    root = tmp_path_factory.mktemp("layers")
    exported: dict[tuple[tuple[str, ...], bool], dict[str, str]] = {}
    done: dict[str, Path] = {}

    def installed(layer: str, extras: tuple[str, ...], tools: bool) -> Path:
        if (extras, tools) not in exported:
            exported[extras, tools] = bundling.layer_requirements(extras=extras, tools=tools)
        text = exported[extras, tools][layer]
        if text not in done:
            target = root / f"{layer}-{len(done)}"
            requirements = target.with_suffix(".txt")
            requirements.write_text(text, encoding="utf-8")
            result = subprocess.run(
                [
                    *(bundling.uv_binary(), "pip", "install", "--offline", "--quiet"),
                    *("--no-deps", "--require-hashes", "--python", sys.executable),
                    *("--target", str(target), "-r", str(requirements)),
                ],
                capture_output=True,
                text=True,
            )
            assert result.returncode == 0, result.stderr[-3000:]
            bundling.finish_layer(target, python=sys.executable)
            done[text] = target
        return done[text]

    return installed


@pytest.fixture(scope="module")
def code(tmp_path_factory: pytest.TempPathFactory, bundling: ModuleType) -> Path:
    return bundling.stage_code(tmp_path_factory.mktemp("asset"))


def _importable(directory: Path) -> set[str]:
    """Top-level names a layer directory provides (packages, modules, extensions)."""
    return {p.name.split(".")[0] for p in directory.iterdir() if not p.name.endswith("-info")}


def _import_alone(code: Path, layers: list[Path], modules: set[str], then: str = "") -> str:
    """Import ``modules`` in an interpreter that sees only the code asset and ``layers``;
    the error output (empty: every import worked)."""
    script = (
        "import importlib, sys\n"
        f"sys.path[:0] = {[str(code), *map(str, layers)]!r}\n"
        f"for name in {sorted(modules)!r}:\n"
        "    importlib.import_module(name)\n"
        f"{then}"
    )
    result = subprocess.run(
        [sys.executable, "-I", "-S", "-c", script], capture_output=True, text=True, cwd=code
    )
    return result.stderr[-3000:] if result.returncode else ""


def test_the_analysis_follows_the_code_it_is_known_to_reach() -> None:
    # A guard on the derivation: if it stopped following imports or container properties,
    # every check below could pass on nothing.
    runner = reachable_modules("run_segment", runner=True)
    assert {"langorch.engine.compiler", "langorch.adapters.dynamodb.checkpointer"} <= runner
    assert {"langorch.llm.bedrock", "langorch.adapters.mcp"} <= runner
    trigger = reachable_modules("trigger", runner=False)
    assert {"langorch.app.triggers", "langorch.adapters.dynamodb.runs"} <= trigger
    assert "langorch.adapters.slack" in reachable_modules("approval_callback", runner=False)
    assert third_party("langorch.adapters.slack", in_functions=False) == {"slack_sdk"}


@pytest.mark.parametrize("name", WITHOUT_THE_RUNNER)
def test_a_function_without_the_runner_layer_loads_none_of_the_runners_code(name: str) -> None:
    # Given what the function loads: its handler's imports and the container properties its
    # use-cases reach (exactly, no function body guessed at)
    loaded = load_time_modules(HANDLERS[name])
    # Then none of it is the engine, the LangGraph stores or an LLM, tool or trace adapter
    assert runner_code_in(loaded) == set()


@pytest.mark.parametrize("name", WITHOUT_THE_RUNNER)
def test_a_function_without_the_runner_layer_imports_with_the_base_layer_alone(
    name: str, install: Installer, code: Path, bundling: ModuleType
) -> None:
    # Given the base layer installed alone
    base = install(bundling.BASE_LAYER, (), False)
    # When every module the function's code can reach is imported with only it on the path
    modules = reachable_modules(HANDLERS[name], runner=False)
    error = _import_alone(code, [base], modules)
    # Then all import, and what they import inside functions is in the layer too
    assert error == ""
    lazy = {(m, p) for m in modules for p in third_party(m, in_functions=True)}
    assert {(m, p) for m, p in lazy if p not in _importable(base)} <= BUILT_ONLY_IN_THE_RUNNER


def test_the_base_layer_builds_a_client_for_every_aws_service_it_keeps(
    install: Installer, code: Path, bundling: ModuleType
) -> None:
    # Given the base layer, its botocore pruned to the services the functions use
    base = install(bundling.BASE_LAYER, (), False)
    services = sorted(bundling.BOTOCORE_SERVICES)
    # When boto3 builds a client for each of them, and the DynamoDB resource (no request made)
    build = (
        "session = sys.modules['boto3'].Session(\n"
        "    aws_access_key_id='k', aws_secret_access_key='s', region_name='eu-west-1')\n"
        f"for service in {services!r}:\n"
        "    session.client(service)\n"
        "session.resource('dynamodb')\n"
    )
    error = _import_alone(code, [base], {"boto3"}, build)
    # Then every one is built from the models the layer kept
    assert error == ""


@pytest.mark.parametrize(
    "every", [False, True], ids=["cdk.json's deployment (bedrock)", "every extra and MCP"]
)
def test_the_runner_imports_with_the_base_and_its_own_layer_alone(
    every: bool, install: Installer, code: Path, bundling: ModuleType
) -> None:
    # Given the base layer and the runner's, for a deployment's extras (Bedrock alone, or
    # every extra and MCP tools)
    extras, tools = (bundling.LAYER_EXTRAS, True) if every else (("bedrock",), False)
    layers = [install(bundling.BASE_LAYER, extras, tools), install("runner", extras, tools)]
    left_out = [o for o in OPTIONAL if o not in extras and not (o == "tools" and tools)]
    sdks = {p for o in left_out for p in OPTIONAL[o][0]}
    adapters = {m for o in left_out for m in OPTIONAL[o][1]}
    # When every module the runner can reach (but the adapters of what the deployment left
    # out) is imported, and the engine loaded, with only those on the path (with every
    # extra, the libraries' entry points too: the layers have no numpy or zstandard)
    modules = reachable_modules("run_segment", runner=True) - adapters
    engine = "sys.modules['functions.run_segment.handler'].load_engine()\n"
    error = _import_alone(code, layers, modules, engine + (LIBRARY_ENTRY_POINTS if every else ""))
    # Then all import, and what they import inside functions is installed, but the SDKs of
    # what was left out (a step naming one fails with a message saying how to add it)
    assert error == ""
    provided = set().union(*map(_importable, layers))
    lazy = {p for m in modules for p in third_party(m, in_functions=True)}
    assert lazy - provided <= sdks


def _pins(text: str, bundling: ModuleType) -> set[tuple[str, str]]:
    """(package, version) of every ``name==version`` line (a package the lock forks by Python
    version, numpy, is pinned once per version, each under its marker)."""
    return {
        (bundling.normalized(line.split("==")[0]), line.split("==")[1].split()[0])
        for line in text.splitlines()
        if "==" in line and not line.startswith(("#", " "))
    }


def test_each_layer_installs_exactly_the_locked_versions_boto3_pinned_in_the_base(
    bundling: ModuleType,
) -> None:
    lock = tomllib.loads((bundling.REPO_ROOT / "uv.lock").read_text(encoding="utf-8"))
    locked = {(p["name"], p["version"]) for p in lock["package"] if "version" in p}
    # Given each layer's requirements, exported from the lock
    layers = bundling.layer_requirements()
    pins = {layer: _pins(text, bundling) for layer, text in layers.items()}
    names = {layer: {name for name, _ in pinned} for layer, pinned in pins.items()}
    for layer, text in layers.items():
        # Then every pin is a locked version, with its hashes
        assert pins[layer], layer
        assert pins[layer] <= locked, layer
        blocks = bundling.requirement_blocks(text).values()
        assert all("--hash=sha256:" in block for block in blocks), layer
    # ...the layers share nothing and together are the whole runtime export
    assert not names["base"] & names["runner"]
    assert pins["base"] | pins["runner"] == _pins(bundling.export_requirements(), bundling)
    # ...boto3 and botocore are pinned in the base layer, not left to the Lambda runtime's copy
    versions = dict(locked)
    assert {("boto3", versions["boto3"]), ("botocore", versions["botocore"])} <= pins["base"]
    assert {"aws-lambda-powertools", "pydantic"} <= names["base"]
    assert {"langgraph", "langchain-core", "openai", "mcp"} <= names["runner"]
    assert not {"moto", "pytest", "mypy", "aws-cdk-lib", "langgraph-checkpoint-sqlite"} & (
        names["base"] | names["runner"]
    )


def test_the_runner_layer_carries_only_the_extras_the_deployment_configures(
    bundling: ModuleType,
) -> None:
    # Given a deployment with Bedrock alone, no MCP server and no OpenTelemetry
    runner = bundling.requirement_blocks(
        bundling.layer_requirements(extras=("bedrock",), tools=False)["runner"]
    )
    # Then its runner layer has LangGraph and langchain-aws, and no other SDK
    assert {"langgraph", "langgraph-checkpoint-aws", "langchain-aws"} <= set(runner)
    assert not {"openai", "anthropic", "mcp", "cryptography", "opentelemetry-sdk"} & set(runner)


def test_an_unknown_extra_is_refused_with_the_ones_there_are(bundling: ModuleType) -> None:
    with pytest.raises(bundling.BundlingError, match=r"unknown layer extra.*'bedrock'"):
        bundling.layer_requirements(extras=("bedrok",))
