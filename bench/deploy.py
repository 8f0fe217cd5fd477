"""What gets deployed: the built Lambda code asset and dependency layer (P4), and each handler's
cold import (P3).

P4  The code asset (``functions/`` + ``shared/langorch``) and the dependency layers are built
    exactly as ``make deploy`` builds them (``infra/constructs/bundling.py``: arm64 wheels,
    boto3 and botocore pinned from the lock, pruned, byte-compiled for Python 3.12, the
    layers' byte code without its sources) and
    measured unzipped, per function: its code plus the layers it gets (the base layer for
    every function, the runner's own layer for the runner), the figure Lambda's 250 MB limit
    and P4's 100 MB target are about. The runner's layer holds the deployment's LLM providers
    (``--extras``, default ``bedrock`` as ``cdk.json`` configures) and the MCP SDK with
    ``--tools``; the runner with every extra and the MCP SDK is printed beside it. Layers are
    cached under ``build/bench/layers`` and rebuilt only when their requirements change.

P3  Each handler module is imported in a fresh interpreter (``python -c "import
    functions.<name>.handler"``), alternated with ``python -c "import boto3"``, from a
    byte-compiled copy of the code asset (as in Lambda, where nothing is compiled at cold
    start); median of the rounds, as a multiple of boto3's median. The runner is timed with
    ``load_engine()`` too: its module no longer imports the engine, that hook does (before
    SnapStart's snapshot, or at the first segment), so the import alone leaves most of its
    cold start out. The layer is built for arm64 and cannot be imported on this machine, so
    the dependencies come from the local virtual environment (same versions, installed
    byte-compiled by pip), with the packages the layer prunes blocked. Tracing is off here as
    it is outside Lambda; the runner is measured a second time as deployed with active tracing
    (``LAMBDA_TASK_ROOT`` set, so Powertools' Tracer turns on and loads the X-Ray SDK), to show
    what tracing costs at cold start.

Run with ``make bench`` (after ``bench/engine.py``) or ``python bench/deploy.py``;
``python bench/deploy.py --imports-only`` skips the bundle (P3 only).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

from _support import import_ratios, table  # noqa: E402

from infra.constructs import bundling  # noqa: E402

BUILD = REPO / "build" / "bench"
HANDLERS = ("trigger", "approval_callback", "request_approval", "run_segment")
IMPORT_TARGETS = {"trigger": 2.0, "approval_callback": 2.0, "run_segment": 5.5}
"""PERFORMANCE.md P3: trigger and callback at most 2x, the runner 5.5x ``import boto3``."""
IMPORT_ROUNDS = 7
ENGINE = "import functions.run_segment.handler as h; h.load_engine()"
RUNNER = "functions.run_segment.handler + load_engine()"
TRACED_RUNNER = "functions.run_segment.handler + load_engine() (tracing on)"
P4_TARGET_MB = 100.0
HEAVY = ("langgraph", "langchain_core", "langsmith", "langchain_aws", "langchain_openai", "openai")
"""Packages a handler's import must not load unless it needs them (the trigger path never)."""


# ============================================================================================
# P4: sizes
# ============================================================================================


def tree_bytes(path: Path) -> int:
    """Bytes of every file under ``path`` (what Lambda unzips)."""
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())


def build_layer(name: str, requirements: str, python312: str) -> Path:
    """A layer's ``python/`` directory, built as for deploy (cached by its requirements and
    the way layers are built, as the deployed layer's asset hash is)."""
    layer = BUILD / "layers" / name
    stamp = layer / "requirements.txt"
    built_from = requirements + bundling.layer_recipe()
    if stamp.exists() and stamp.read_text(encoding="utf-8") == built_from:
        return layer / "python"
    shutil.rmtree(layer, ignore_errors=True)
    layer.mkdir(parents=True)
    source = BUILD / f"layer-{name}-requirements.txt"
    source.write_text(requirements, encoding="utf-8")
    print(f"  building the {name} layer (arm64 wheels, Python {bundling.PYTHON_VERSION}) ...")
    started = time.perf_counter()
    bundling.build_layer(source, layer, python312=python312)
    stamp.write_text(built_from, encoding="utf-8")
    print(f"  built in {time.perf_counter() - started:.0f} s")
    return layer / "python"


def largest(layer: Path) -> list[tuple[str, int]]:
    """The layer's top-level entries by size, largest first."""
    sizes = ((p.name, tree_bytes(p) if p.is_dir() else p.stat().st_size) for p in layer.iterdir())
    return sorted(sizes, key=lambda item: -item[1])


def bench_sizes(extras: tuple[str, ...], tools: bool) -> dict[str, Any]:
    """P4: each function's code asset plus its layers, unzipped, with the layers' largest
    packages; and the runner with every extra, the most a deployment can configure."""
    python312 = bundling.find_python312()
    code = bundling.stage_code(BUILD, python312=python312)
    configured = bundling.layer_requirements(extras=extras, tools=tools)
    everything = bundling.layer_requirements(extras=bundling.LAYER_EXTRAS, tools=True)
    layers = {name: build_layer(name, text, python312) for name, text in configured.items()}
    layers["runner, every extra"] = build_layer(
        "runner-all", everything[bundling.RUNNER_LAYER], python312
    )
    sizes = {name: tree_bytes(path) for name, path in layers.items()}
    code_bytes = tree_bytes(code)
    functions = {
        name: [bundling.BASE_LAYER] for name in ("trigger", "approval-callback", "request-approval")
    }
    functions["run-segment"] = [bundling.BASE_LAYER, bundling.RUNNER_LAYER]
    functions["run-segment, every extra + MCP"] = [bundling.BASE_LAYER, "runner, every extra"]
    rows: list[list[Any]] = []
    totals: dict[str, int] = {}
    for function, its_layers in functions.items():
        total = totals[function] = code_bytes + sum(sizes[layer] for layer in its_layers)
        rows.append(
            [
                function,
                " + ".join(its_layers),
                code_bytes / 1e6,
                sum(sizes[layer] for layer in its_layers) / 1e6,
                total / 1e6,
                "yes" if total <= P4_TARGET_MB * 1e6 else "NO",
            ]
        )
    print(
        table(
            f"P4  Lambda bundle per function, unzipped, byte-compiled (runner extras: "
            f"{', '.join(extras) or 'none'}{', MCP' if tools else ''}; target "
            f"{P4_TARGET_MB:.0f} MB)",
            ["function", "layers", "code MB", "layers MB", "total MB", "<= target"],
            rows,
        )
    )
    for name, path in layers.items():
        print(
            f"  {name} layer {sizes[name] / 1e6:.1f} MB, largest (MB): "
            + ", ".join(f"{n} {size / 1e6:.1f}" for n, size in largest(path)[:6] if size > 1e6)
        )
    print()
    return {
        "code_bytes": code_bytes,
        "layer_bytes": sizes,
        "function_bytes": totals,
        "target_bytes": int(P4_TARGET_MB * 1e6),
        "runner_extras": list(extras),
        "runner_tools": tools,
    }


# ============================================================================================
# P3: each handler's cold import
# ============================================================================================


def compiled_code() -> Path:
    """A copy of the code asset byte-compiled by this interpreter (unchecked-hash, as deployed)."""
    code = bundling.stage_code(BUILD / "local")
    bundling.byte_compile(sys.executable, code)
    return code


def bench_handler_imports() -> dict[str, Any]:
    """P3: ``import functions.<name>.handler`` per handler, alternated with ``import boto3``."""
    code_dir = compiled_code()
    env = {
        **os.environ,
        "PYTHONPATH": str(code_dir),  # the asset's layout: /var/task/functions, /var/task/langorch
        "AWS_DEFAULT_REGION": os.environ.get("AWS_DEFAULT_REGION", "us-east-1"),
        "POWERTOOLS_SERVICE_NAME": "langorch",
    }
    # What the layer prunes is absent in Lambda: block it here too (the venv still has it),
    # PyYAML's libyaml binding included (a pruned file, which `import yaml` loads when there).
    pruned = (*bundling.PRUNED, "yaml._yaml")
    absent = f"import sys; sys.modules.update(dict.fromkeys({pruned!r}))\n"
    sets = {
        f"functions.{name}.handler": f"{absent}import functions.{name}.handler" for name in HANDLERS
    }
    # The runner's module no longer imports the engine (LangGraph, the compiler, the saver):
    # load_engine() does, before SnapStart's snapshot or at the first segment. Timing the
    # import alone would leave most of the runner's cold start out; the figure that counts is
    # the import plus load_engine(), what a sandbox without SnapStart pays before a segment.
    sets[RUNNER] = f"{absent}{ENGINE}"
    # As deployed (Tracing.ACTIVE): Powertools sees LAMBDA_TASK_ROOT and turns tracing on.
    traced = "import os; os.environ['LAMBDA_TASK_ROOT'] = os.getcwd()\n"
    sets[TRACED_RUNNER] = f"{absent}{traced}{ENGINE}"
    results = import_ratios(
        sets,
        rounds=IMPORT_ROUNDS,
        targets={
            RUNNER: IMPORT_TARGETS["run_segment"],
            TRACED_RUNNER: IMPORT_TARGETS["run_segment"],
            **{f"functions.{name}.handler": t for name, t in IMPORT_TARGETS.items()},
        },
        watched=HEAVY,
        title=f"P3  cold import of each handler (byte-compiled asset), median of {IMPORT_ROUNDS} "
        "rounds alternated with boto3",
        env=env,
    )
    print("  trigger and approval_callback must load none of langgraph, langchain_core, langsmith")
    print()
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--imports-only", action="store_true", help="measure P3 only (skip building the bundle)"
    )
    parser.add_argument(
        "--extras",
        default="bedrock",
        help="the runner layer's extras, comma-separated (cdk.json's deployment: bedrock)",
    )
    parser.add_argument(
        "--tools", action="store_true", help="the MCP SDK in the runner layer (mcp_servers set)"
    )
    args = parser.parse_args()
    started = time.perf_counter()
    extras = tuple(e for e in args.extras.split(",") if e)
    results: dict[str, Any] = {}
    if not args.imports_only:
        results["sizes"] = bench_sizes(extras, args.tools)
    results["imports"] = bench_handler_imports()
    results["seconds"] = time.perf_counter() - started
    print(f"deploy bench finished in {results['seconds']:.0f} s")
    out = BUILD / ("deploy-imports.json" if args.imports_only else "deploy.json")
    out.write_text(json.dumps(results, indent=2), encoding="utf-8")
    print(f"figures written to {out.relative_to(REPO)}")


if __name__ == "__main__":
    main()
