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


LIBRARY_CLIENT_CODE = {
    # The library classes our code hands AWS work to, and the files that build their clients:
    # ChatBedrockConverse and BedrockEmbeddings (Container.llm, the memory's embeddings),
    # DynamoDBStore (Container.memory_store), SecretsProvider (adapters/secrets.py).
    "langchain_aws": ("chat_models/bedrock_converse.py", "embeddings/bedrock.py"),
    "langgraph_checkpoint_aws": ("store/dynamodb/base.py", "checkpoint/dynamodb/utils.py"),
    "aws_lambda_powertools": ("utilities/parameters/secrets.py",),
}


def _client_services(files: list[Path]) -> set[str]:
    """The AWS services ``files`` build clients for: the service name given as a literal to a
    call named ``*client`` or ``resource`` (``self.client("s3")``, ``make_client("sts", ...)``,
    ``create_aws_client(service_name="bedrock")``)."""
    import ast

    services: set[str] = set()
    for file in files:
        text = file.read_text(encoding="utf-8")
        if "client(" not in text and "resource(" not in text:
            continue
        for node in ast.walk(ast.parse(text)):
            if not isinstance(node, ast.Call):
                continue
            name = getattr(node.func, "attr", None) or getattr(node.func, "id", "")
            if not (name.endswith("client") or name == "resource"):
                continue
            given = node.args[:1] + [k.value for k in node.keywords if k.arg == "service_name"]
            services |= {a.value for a in given if isinstance(a, ast.Constant)}
    return {s for s in services if isinstance(s, str)}


def test_the_layers_keep_the_model_of_every_aws_service_our_code_builds_a_client_for(
    tmp_path: Path,
) -> None:
    from infra.constructs.bundling import BOTOCORE_SERVICES, stage_code

    # Given every module the code asset ships
    code = stage_code(tmp_path)
    services = _client_services(sorted(code.rglob("*.py")))
    # Then the analysis sees the clients it is known to (a guard: it could find nothing)...
    assert {"dynamodb", "stepfunctions", "bedrock-runtime", "sts"} <= services
    # ...and the layers keep the botocore model of each: pruning one would fail its client
    # with UnknownServiceError only when a function first built it
    assert services - BOTOCORE_SERVICES == set()


def test_the_layers_keep_the_model_of_every_aws_service_the_libraries_we_use_build() -> None:
    import importlib.util

    from infra.constructs.bundling import BOTOCORE_SERVICES

    # Given the files of the library classes our code hands AWS work to (located, not imported)
    found: dict[str, set[str]] = {}
    for package, files in LIBRARY_CLIENT_CODE.items():
        spec = importlib.util.find_spec(package)
        assert spec is not None and spec.submodule_search_locations, package
        root = Path(next(iter(spec.submodule_search_locations)))
        found[package] = _client_services([root / file for file in files])
    # Then langchain-aws's control-plane client is seen beside the runtime one (a guard)...
    assert {"bedrock-runtime", "bedrock"} <= found["langchain_aws"]
    # ...and the layers keep every service those libraries build a client for
    assert set().union(*found.values()) - BOTOCORE_SERVICES == set()


def test_pruning_keeps_the_models_of_the_services_we_use_and_removes_the_others(
    tmp_path: Path,
) -> None:
    from infra.constructs.bundling import prune_layer

    # Given botocore's and boto3's models of a service we use and of one we do not
    for package in ("botocore", "boto3"):
        for service in ("dynamodb", "ec2"):
            (tmp_path / package / "data" / service / "2012-08-10").mkdir(parents=True)
    (tmp_path / "botocore" / "data" / "endpoints.json").write_text("{}")
    # When the layer is pruned
    prune_layer(tmp_path)
    # Then only the used service's models are left, with botocore's shared data files
    assert sorted(p.name for p in (tmp_path / "botocore" / "data").iterdir()) == [
        "dynamodb",
        "endpoints.json",
    ]
    assert [p.name for p in (tmp_path / "boto3" / "data").iterdir()] == ["dynamodb"]


def test_pruning_removes_the_files_no_function_reads(tmp_path: Path) -> None:
    from infra.constructs.bundling import prune_layer

    # Given an installed layer's records, the libyaml binding and Powertools' Swagger UI
    swagger = tmp_path / "aws_lambda_powertools" / "event_handler" / "openapi" / "swagger_ui"
    for directory in ("yaml", "PyYAML-6.0.3.dist-info", swagger):
        (tmp_path / directory).mkdir(parents=True)
    kept = ["yaml/__init__.py", "yaml/cyaml.py", "PyYAML-6.0.3.dist-info/METADATA"]
    removed = [
        "yaml/_yaml.cpython-312-aarch64-linux-gnu.so",
        "yaml/_yaml.c",
        "PyYAML-6.0.3.dist-info/RECORD",
        f"{swagger.relative_to(tmp_path)}/swagger-ui-bundle.min.js",
        f"{swagger.relative_to(tmp_path)}/swagger-ui.min.css",
    ]
    for name in [*kept, *removed, f"{swagger.relative_to(tmp_path)}/html.py"]:
        (tmp_path / name).write_text("")
    # When the layer is pruned
    prune_layer(tmp_path)
    # Then those are gone, and the modules and the package metadata are not
    assert [name for name in removed if (tmp_path / name).exists()] == []
    assert all((tmp_path / name).exists() for name in kept)
    assert (swagger / "html.py").exists()


def test_yaml_loads_without_its_libyaml_binding() -> None:
    # The layer drops PyYAML's C binding: loading definitions must not need it.
    code = (
        "import sys; sys.modules['yaml._yaml'] = None\n"
        "import yaml\n"
        "assert not yaml.__with_libyaml__\n"
        "assert yaml.safe_load('steps: [a, b]') == {'steps': ['a', 'b']}\n"
        "import langorch.domain.loading\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr[-2000:]


def test_a_finished_layer_imports_from_byte_code_alone_naming_its_lambda_path(
    tmp_path: Path,
) -> None:
    from infra.constructs.bundling import LAYER_PATH, finish_layer

    # Given an installed package
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text("")
    (tmp_path / "pkg" / "mod.py").write_text("def fail():\n    raise ValueError('x')\n")
    # When the layer is finished
    finish_layer(tmp_path, python=sys.executable)
    # Then only its byte code is left...
    assert sorted(p.name for p in (tmp_path / "pkg").iterdir()) == ["__init__.pyc", "mod.pyc"]
    # ...it imports in an interpreter that sees nothing else, and a traceback names the file
    # where Lambda puts it
    script = (
        f"import sys; sys.path.insert(0, {str(tmp_path)!r})\n"
        "import pkg.mod\n"
        "try:\n    pkg.mod.fail()\n"
        "except ValueError as exc:\n"
        "    print(exc.__traceback__.tb_next.tb_frame.f_code.co_filename)\n"
    )
    result = subprocess.run(
        [sys.executable, "-I", "-S", "-c", script], capture_output=True, text=True
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.strip() == f"{LAYER_PATH}/pkg/mod.py"


def test_a_layers_asset_changes_with_the_way_layers_are_built_not_only_its_requirements(
    tmp_path: Path,
) -> None:
    import hashlib

    from infra.constructs import bundling

    # Given a layer's source staged for CDK (whose asset hash is this directory's)
    source = bundling.stage_layer_source(tmp_path, "runner", "langgraph==1.0\n")
    # Then it holds the requirements and the hash of the module that prunes and compiles
    digest = hashlib.sha256(Path(bundling.__file__).read_bytes()).hexdigest()
    assert (source / "requirements.txt").read_text() == "langgraph==1.0\n"
    assert digest in (source / "recipe.txt").read_text()
