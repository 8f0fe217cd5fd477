"""Lambda assets built without Docker: the code asset and the dependency layers.

CDK's ``PythonFunction`` bundles in a Docker container; there is no Docker here and the first
real ``cdk deploy`` must not need one. Instead:

- **code**: ``functions/`` and ``shared/langorch`` are copied side by side into one directory
  (``/var/task/functions/...`` and ``/var/task/langorch/...`` in Lambda), so every function
  ships the same asset and the handlers import ``langorch`` as in local mode. The operator's
  own packages (``cli``, ``console``, ``local``), which no handler can import (the layers
  contract in ``pyproject.toml``), are left out.
- **layers**: the runtime dependencies exactly as ``uv.lock`` pins them (``uv export``, with
  their hashes), boto3 and botocore included rather than left to the runtime's copy, split in
  two so each function loads only what it imports (:func:`layer_requirements`): the **base**
  layer every function has, and the **runner** layer (LangGraph, the checkpoint store, the
  deployment's LLM providers and, when configured, the MCP SDK and OpenTelemetry) only the
  runner has. Each layer is
  ``uv pip install --target`` with ``--python-platform aarch64-manylinux_2_34
  --python-version 3.12 --only-binary :all:`` fetches the arm64 wheels, what no function
  reads is pruned (:func:`prune_layer`: botocore's models of services no function calls,
  stubs, an unused binding), then the Python 3.12 interpreter compiles them to byte code
  without their sources (:func:`finish_layer`: P4's 100 MB per function with every extra
  holds only so). This runs as an ``ILocalBundling`` step only when the
  ``bundle`` setting is on (``make deploy``); synth and tests use a placeholder so they stay
  offline and take seconds.

Byte code uses ``--invalidation-mode unchecked-hash``: Lambda's ``/var/task`` and ``/opt`` are
read-only and CDK's zips reset file times, so timestamp-checked ``.pyc`` files would be judged
stale and recompiled in memory on every cold start.
"""

from __future__ import annotations

import glob
import hashlib
import os
import re
import shutil
import subprocess
import tomllib
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import jsii
from aws_cdk import BundlingOptions, DockerImage, ILocalBundling
from aws_cdk import aws_lambda as lambda_

REPO_ROOT = Path(__file__).resolve().parents[2]
PYTHON_VERSION = "3.12"
RUNTIME = lambda_.Runtime.PYTHON_3_12
ARCHITECTURE = lambda_.Architecture.ARM_64
PLATFORM = "aarch64-manylinux_2_34"
"""The Lambda python3.12 runtime: Amazon Linux 2023 (glibc 2.34) on arm64."""
LAYER_EXTRAS = ("bedrock", "openai", "anthropic", "otel")
"""Optional dependency groups the cloud runner may need (LLM providers and the OpenTelemetry
exporter are imported lazily; langsmith imports the OpenTelemetry SDK when installed, in the
runner's SnapStart snapshot). A deployment's runner layer carries the ones it configures
(``DeployConfig.runner_extras``)."""
ENGINE_PACKAGES = (
    "langgraph",
    "langgraph-checkpoint",
    "langgraph-checkpoint-aws",
    "langchain-core",
)
"""Dependencies only the runner imports: LangGraph and the checkpoint and memory stores
(``tests/infra/test_layers.py`` proves the other handlers load none of them)."""
TOOLS_PACKAGES = ("mcp",)
"""The MCP SDK: the runner opens registered tool servers with it, and only a deployment with
``mcp_servers`` may (any other refuses a registered tool before connecting)."""
BASE_LAYER, RUNNER_LAYER = "base", "runner"
CODE_LEFT_OUT = ("cli", "console", "local")
"""``langorch`` packages the code asset leaves out: the operator's side, never a handler's."""
PRUNED = ("numpy", "numpy.libs", "zstandard")
"""Installed as requirements of requirements, never needed on the paths the runner takes:

- numpy (62 MB of the layer's 168 MB): langchain-aws requires it, but its chat models,
  langchain-openai, LangGraph and the checkpoint store import without it (only langchain-aws's
  embeddings and vector stores use it, and no step kind does);
- zstandard (11 MB, a C extension): langsmith requires it to compress traces it uploads and
  httpx to decode ``zstd`` responses; both import it optionally and fall back, and langorch
  sends no traces to LangSmith. Without it the runner's cold start also skips loading it.

``tests/infra/test_bundling.py`` proves those imports still work without them."""
PRUNED_FILES = (
    # Type stubs and C sources: for type checkers and compilers, never read at run time.
    "**/*.pyi",
    "**/*.c",
    # The installer's list of the files it wrote, with their hashes: read by uninstallers
    # only, and no longer true once the layer is pruned and compiled (1.3 MB over the layers).
    "*.dist-info/RECORD",
    # PyYAML's libyaml binding (2.9 MB, every function): ``import yaml`` loads it when present
    # and falls back when not; our code parses with ``yaml.safe_load``, the pure-Python
    # loader, so the binding was loaded at every cold start and never used.
    "yaml/_yaml.*.so",
    # Powertools' Swagger UI (1.7 MB), served only by ``enable_swagger()``, which no handler
    # calls (the routes it would serve do not exist).
    "aws_lambda_powertools/event_handler/openapi/swagger_ui/*.min.*",
)
"""Files no function reads, as globs under the layer's root."""
BOTOCORE_SERVICES = frozenset(
    {
        # The clients langorch's code asset builds (``Container.client``, ``make_client``,
        # ``bedrock_runtime_client``): tests/infra/test_bundling.py derives them from the code.
        "bedrock-runtime",
        "dynamodb",
        "events",
        "lambda",
        "logs",
        "s3",
        "scheduler",
        "secretsmanager",
        "ses",
        "sqs",
        "stepfunctions",
        "sts",
        # langchain-aws's ChatBedrockConverse builds a control-plane client of its own beside
        # the bedrock-runtime one it is given (the same test reads its source).
        "bedrock",
    }
)
"""The AWS services whose botocore models (and boto3 resource models) a layer keeps.

botocore ships the model of every AWS service, 400-odd of them: 21 MB of the 56 MB every
function loaded, for the 13 services a function can build a client for (1.2 MB). A client for a
service pruned here fails with botocore's ``UnknownServiceError`` naming the service:
add it to this set."""
LAYER_PATH = "/opt/python"
"""Where Lambda puts a layer's ``python/`` directory (what its byte code names as its files)."""
_IGNORED = shutil.ignore_patterns("__pycache__", "*.pyc", "*.pyo", ".mypy_cache")


class BundlingError(RuntimeError):
    """The dependency layer cannot be built; the message says what to install or change."""


def uv_binary() -> str:
    """The uv that built ``uv.lock`` (the infra extra pins it; the Makefile installs the same)."""
    from uv import find_uv_bin

    return str(find_uv_bin())


def export_requirements(project: Path = REPO_ROOT) -> str:
    """The whole runtime set as one requirements file: the package's dependencies and every
    layer extra, each pinned to the version in ``uv.lock`` with its hashes (no development
    tools, not the project itself).

    Raises:
        BundlingError: the lock is missing or no longer matches ``pyproject.toml``.
    """
    command = [uv_binary(), "export", "--frozen", "--no-dev", "--no-emit-project"]
    command += [f"--extra={extra}" for extra in LAYER_EXTRAS]
    command += ["--format", "requirements.txt", "--quiet"]
    result = subprocess.run(command, capture_output=True, text=True, cwd=project)
    if result.returncode != 0:
        raise BundlingError(f"uv could not export the layer's requirements:\n{result.stderr}")
    return result.stdout


def normalized(name: str) -> str:
    """A distribution name as the lock spells it (PEP 503)."""
    return re.sub(r"[-_.]+", "-", name).lower()


def requirement_blocks(text: str) -> dict[str, str]:
    """``uv export``'s requirements split per package: name -> its lines (pin, hashes, via)."""
    blocks: dict[str, list[str]] = {}
    current: list[str] | None = None
    for line in text.splitlines():
        if line and not line.startswith(("#", " ")):
            name = re.split(r"[=<>!~ ;\[]", line, maxsplit=1)[0]
            current = blocks.setdefault(normalized(name), [])
        elif current is None or not line:
            continue
        current.append(line)
    return {name: "\n".join(lines) + "\n" for name, lines in blocks.items()}


def locked_closure(roots: Iterable[tuple[str, Sequence[str]]], lock: dict[str, Any]) -> set[str]:
    """Every package ``roots`` (name, extras) need, transitively, as ``uv.lock`` records them.

    Markers are not evaluated (a Windows-only dependency is kept): the export's own markers
    decide at install time, for the Lambda platform.
    """
    packages = {p["name"]: p for p in lock["package"]}
    seen: set[tuple[str, str]] = set()
    pending = [(normalized(name), extra) for name, extras in roots for extra in ("", *extras)]
    while pending:
        name, extra = pending.pop()
        if (name, extra) in seen or name not in packages:
            continue
        seen.add((name, extra))
        package = packages[name]
        wanted = package.get("optional-dependencies", {}).get(extra, []) if extra else []
        for dependency in wanted or (package.get("dependencies", []) if not extra else []):
            for each in ("", *dependency.get("extra", [])):
                pending.append((dependency["name"], each))
    return {name for name, _ in seen}


def layer_requirements(
    *, extras: Sequence[str] = LAYER_EXTRAS, tools: bool = True, project: Path = REPO_ROOT
) -> dict[str, str]:
    """The layers' requirements files, carved out of one ``uv export`` of the lock.

    - ``base`` (every function): the package's dependencies but the engine's and the MCP
      SDK's, with everything they need — boto3 and botocore pinned, Powertools, pydantic,
      Jinja2 ...;
    - ``runner`` (the runner only): LangGraph and the stores (:data:`ENGINE_PACKAGES`), the
      ``extras`` the deployment uses (its LLM providers, ``otel``), the MCP SDK when ``tools``,
      and what they need that the base layer does not already hold.

    Both are the export's own lines, so every pin is the locked version with its hashes.

    Args:
        extras: optional dependency groups (of :data:`LAYER_EXTRAS`) for the runner.
        tools: put the MCP SDK in the runner layer (a deployment with ``mcp_servers``).
        project: the directory holding ``pyproject.toml`` and ``uv.lock``.

    Raises:
        BundlingError: the lock is missing or out of date, or an extra is unknown.
    """
    unknown = sorted(set(extras) - set(LAYER_EXTRAS))
    if unknown:
        raise BundlingError(f"unknown layer extra(s) {unknown}: one of {list(LAYER_EXTRAS)}")
    blocks = requirement_blocks(export_requirements(project))
    lock = tomllib.loads((project / "uv.lock").read_text(encoding="utf-8"))
    own = next(p for p in lock["package"] if p.get("source", {}).get("editable") == ".")
    runner_only = {*ENGINE_PACKAGES, *TOOLS_PACKAGES}
    base_roots = [
        (d["name"], d.get("extra", [])) for d in own["dependencies"] if d["name"] not in runner_only
    ]
    runner_roots = [(name, []) for name in (*ENGINE_PACKAGES, *(TOOLS_PACKAGES if tools else ()))]
    for extra in extras:
        runner_roots += [
            (d["name"], d.get("extra", [])) for d in own["optional-dependencies"][extra]
        ]
    base = locked_closure(base_roots, lock) & set(blocks)
    runner = (locked_closure(runner_roots, lock) & set(blocks)) - base
    header = "# {} layer, exported from uv.lock by infra/constructs/bundling.py\n"
    return {
        layer: header.format(layer) + "".join(blocks[name] for name in sorted(names))
        for layer, names in ((BASE_LAYER, base), (RUNNER_LAYER, runner))
    }


def stage_code(build_dir: Path, *, python312: str | None = None) -> Path:
    """Copy ``functions/`` and ``shared/langorch`` into ``build_dir/code``.

    Args:
        build_dir: the staging root (replaced on every call).
        python312: when given, byte-compile the copy with this interpreter.

    Returns:
        The directory to hand to ``Code.from_asset``.
    """
    code = build_dir / "code"
    if code.exists():
        shutil.rmtree(code)
    shutil.copytree(REPO_ROOT / "functions", code / "functions", ignore=_IGNORED)
    package = REPO_ROOT / "shared" / "langorch"

    def ignored(directory: str, names: list[str]) -> set[str]:
        left_out = set(CODE_LEFT_OUT) & set(names) if Path(directory) == package else set()
        return set(_IGNORED(directory, names)) | left_out

    shutil.copytree(package, code / "langorch", ignore=ignored)
    if python312:
        byte_compile(python312, code)
    return code


def stage_layer_source(build_dir: Path, layer: str, text: str) -> Path:
    """Write ``layer``'s requirements (``text``) and :func:`layer_recipe` into
    ``build_dir/layer-src/<layer>``.

    The asset hash of the layer is the hash of this directory (plus the bundling options), so
    the layer is rebuilt exactly when its requirements or the way it is built change, and
    reused otherwise.
    """
    source = build_dir / "layer-src" / layer
    source.mkdir(parents=True, exist_ok=True)
    for name, content in (("requirements.txt", text), ("recipe.txt", layer_recipe())):
        target = source / name
        if not target.exists() or target.read_text(encoding="utf-8") != content:
            target.write_text(content, encoding="utf-8")
    return source


def layer_recipe() -> str:
    """How a layer is built beside its requirements — this module (the platform, the pruning,
    the byte code) — as its hash: the bundling options CDK hashes do not include the local
    bundler's code, so a new way of pruning would otherwise reuse the old layer."""
    digest = hashlib.sha256(Path(__file__).read_bytes()).hexdigest()
    return f"# built by infra/constructs/bundling.py, sha256 {digest}\n"


def stage_layer_placeholder(build_dir: Path) -> Path:
    """An unbuilt layer for synth and tests: a note, no dependencies.

    Deploying it would give functions without their libraries, so ``make deploy`` always
    passes ``-c bundle=true``.
    """
    placeholder = build_dir / "layer-placeholder" / "python"
    placeholder.mkdir(parents=True, exist_ok=True)
    (placeholder / "LAYER_NOT_BUILT.txt").write_text(
        "Placeholder: synthesize with -c bundle=true (make deploy) to build the layer.\n",
        encoding="utf-8",
    )
    return placeholder.parent


def find_python312(explicit: str | None = None) -> str:
    """A Python 3.12 interpreter to byte-compile with (the Lambda runtime's version).

    Raises:
        BundlingError: none found.
    """
    candidates = [explicit] if explicit else []
    candidates.append(shutil.which("python3.12"))
    pyenv_root = Path(os.environ.get("PYENV_ROOT", Path.home() / ".pyenv"))
    candidates.extend(
        sorted(glob.glob(str(pyenv_root / "versions" / "3.12*" / "bin" / "python3.12")))
    )
    for candidate in filter(None, candidates):
        try:
            out = subprocess.run(
                [candidate, "-c", "import sys; print('%d.%d' % sys.version_info[:2])"],
                capture_output=True,
                text=True,
                check=True,
                timeout=30,
            )
        except (OSError, subprocess.SubprocessError):
            continue
        if out.stdout.strip() == PYTHON_VERSION:
            return candidate
    raise BundlingError(
        "building the layer needs a Python 3.12 interpreter to byte-compile for the Lambda "
        "runtime: install one (e.g. `pyenv install 3.12`) or pass -c python312=/path/to/python3.12"
    )


def byte_compile(python312: str, directory: Path, *, sourceless: bool = False) -> None:
    """Byte-compile ``directory`` for Python 3.12 (``unchecked-hash``, see the module doc).

    Args:
        python312: the interpreter to compile with (its version's byte code).
        directory: compiled in place.
        sourceless: a dependency layer's way (:func:`finish_layer`): each ``x.pyc`` beside its
            ``x.py``, naming ``/opt/python/...`` as its file, and the ``.py`` removed.
    """
    command = [python312, "-m", "compileall", "-q", "-j", "0"]
    command += ["--invalidation-mode", "unchecked-hash"]
    if sourceless:
        command += ["-b", "-s", str(directory), "-p", LAYER_PATH]
    subprocess.run([*command, str(directory)], check=True)
    if sourceless:
        for source in directory.rglob("*.py"):
            if source.with_suffix(".pyc").is_file():
                source.unlink()


def build_layer(requirements: Path, output_dir: Path, *, python312: str) -> None:
    """Install the arm64 wheels of ``requirements`` under ``output_dir/python`` and compile.

    Raises:
        BundlingError: uv failed (usually a dependency without an aarch64 wheel).
    """
    target = output_dir / "python"
    command = [
        uv_binary(),
        "pip",
        "install",
        "--quiet",
        "--no-deps",  # the export is the whole, locked set
        "--require-hashes",
        "--target",
        str(target),
        "--python-platform",
        PLATFORM,
        "--python-version",
        PYTHON_VERSION,
        "--only-binary",
        ":all:",
        "-r",
        str(requirements),
    ]
    result = subprocess.run(command, capture_output=True, text=True)
    if result.returncode != 0:
        raise BundlingError(f"uv could not build the layer:\n{result.stderr[-4000:]}")
    finish_layer(target, python=python312)


def finish_layer(target: Path, *, python: str) -> None:
    """Prune an installed layer and compile it to sourceless byte code.

    Sourceless: the dependencies' sources were half of every layer (the runner with every
    extra: 40 MB of ``.py`` beside 39 MB of their ``.pyc``), and a layer without byte code
    would compile them in memory on every cold start (``/opt`` is read-only). Python imports
    a ``.pyc`` alone (``compileall -b``'s layout); what is lost is the source line of a
    dependency's frame in a traceback (the file, line and function are still named) —
    langorch's own code keeps its sources (the code asset). No import path of ours reads a
    dependency's source: LangChain and LangSmith's ``inspect.getsource`` calls catch its
    absence, and tests/infra/test_layers.py imports every module a function reaches from
    layers finished this way.

    Args:
        target: the installed layer (its ``python/`` directory).
        python: the interpreter whose byte code to write (Python 3.12 for Lambda).
    """
    prune_layer(target)
    byte_compile(python, target, sourceless=True)


def prune_layer(target: Path) -> None:
    """Remove what the runner never imports."""
    for name in PRUNED:
        for path in target.glob(f"{name}*"):
            if path.name == name or path.name.startswith(f"{name}-"):
                shutil.rmtree(path) if path.is_dir() else path.unlink()
    for pattern in PRUNED_FILES:
        for path in target.glob(pattern):
            path.unlink()
    # Packages' own test suites, and console scripts: never run in Lambda.
    for tests in [p for p in target.glob("*/tests") if p.is_dir()]:
        shutil.rmtree(tests)
    shutil.rmtree(target / "bin", ignore_errors=True)
    for models in (target / "botocore" / "data", target / "boto3" / "data"):
        for service in models.iterdir() if models.is_dir() else ():
            if service.is_dir() and service.name not in BOTOCORE_SERVICES:
                shutil.rmtree(service)


@jsii.implements(ILocalBundling)
class LocalLayerBundler:
    """``ILocalBundling`` that builds the layer on this machine (no Docker)."""

    def __init__(self, requirements: Path, python312: str) -> None:
        self._requirements = requirements
        self._python312 = python312

    def try_bundle(self, output_dir: str, options: Any = None, **_kwargs: Any) -> bool:
        """Build into ``output_dir``; returning True tells CDK not to try Docker."""
        build_layer(self._requirements, Path(output_dir), python312=self._python312)
        return True


def layer_code(
    build_dir: Path, layer: str, requirements: str | None, *, python312: str | None
) -> lambda_.Code:
    """A dependency layer's code: built from ``requirements`` (a requirements file's text),
    or the placeholder when there are none (``bundle`` off)."""
    if requirements is None:
        return lambda_.Code.from_asset(str(stage_layer_placeholder(build_dir)))
    source = stage_layer_source(build_dir, layer, requirements)
    interpreter = find_python312(python312)
    return lambda_.Code.from_asset(
        str(source),
        bundling=BundlingOptions(
            # Never pulled: the local bundler always succeeds or raises. CDK requires an image.
            image=DockerImage.from_registry("public.ecr.aws/sam/build-python3.12:latest-arm64"),
            local=LocalLayerBundler(source / "requirements.txt", interpreter),
        ),
    )
