"""What gets deployed: the built Lambda code asset and dependency layer (P4), and each handler's
cold import (P3).

P4  The code asset (``functions/`` + ``shared/langorch``) and the layer are built exactly as
    ``make deploy`` builds them (``infra/constructs/bundling.py``: arm64 wheels, boto3 left to
    the runtime, pruned, byte-compiled for Python 3.12) and measured unzipped, the figure
    Lambda's 250 MB limit and P4's 100 MB target are about. The layer is cached under
    ``build/bench/layer`` and rebuilt only when the requirements change.

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


def build_layer(python312: str) -> Path:
    """The layer's ``python/`` directory, built as for deploy (cached by requirements)."""
    requirements = bundling.layer_requirements()
    layer = BUILD / "layer"
    stamp = layer / "requirements.txt"
    if stamp.exists() and stamp.read_text(encoding="utf-8") == requirements:
        return layer / "python"
    shutil.rmtree(layer, ignore_errors=True)
    layer.mkdir(parents=True)
    source = BUILD / "layer-requirements.txt"
    source.write_text(requirements, encoding="utf-8")
    print(f"  building the layer (arm64 wheels, Python {bundling.PYTHON_VERSION}) ...")
    started = time.perf_counter()
    bundling.build_layer(source, layer, python312=python312)
    stamp.write_text(requirements, encoding="utf-8")
    print(f"  built in {time.perf_counter() - started:.0f} s")
    return layer / "python"


def bench_sizes() -> dict[str, Any]:
    """P4: the code asset and the layer, unzipped, with the layer's largest packages."""
    python312 = bundling.find_python312()
    code = bundling.stage_code(BUILD, python312=python312)
    layer = build_layer(python312)
    code_bytes, layer_bytes = tree_bytes(code), tree_bytes(layer)
    packages = sorted(
        ((p.name, tree_bytes(p) if p.is_dir() else p.stat().st_size) for p in layer.iterdir()),
        key=lambda item: -item[1],
    )
    total = code_bytes + layer_bytes
    rows = [
        ["code asset (functions/ + langorch/)", code_bytes / 1e6, code_bytes / 2**20],
        ["dependency layer", layer_bytes / 1e6, layer_bytes / 2**20],
        ["TOTAL unzipped", total / 1e6, total / 2**20],
        ["P4 target", P4_TARGET_MB, P4_TARGET_MB * 1e6 / 2**20],
    ]
    print(table("P4  Lambda bundle, unzipped, byte-compiled", ["part", "MB", "MiB"], rows))
    print(
        "  largest in the layer (MB): "
        + ", ".join(f"{name} {size / 1e6:.1f}" for name, size in packages[:8] if size > 1e6)
    )
    print()
    return {
        "code_bytes": code_bytes,
        "layer_bytes": layer_bytes,
        "total_bytes": total,
        "target_bytes": int(P4_TARGET_MB * 1e6),
        "layer_largest": dict(packages[:8]),
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
    # What the layer prunes is absent in Lambda: block it here too (the venv still has it).
    absent = f"import sys; sys.modules.update(dict.fromkeys({bundling.PRUNED!r}))\n"
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
    args = parser.parse_args()
    started = time.perf_counter()
    results: dict[str, Any] = {} if args.imports_only else {"sizes": bench_sizes()}
    results["imports"] = bench_handler_imports()
    results["seconds"] = time.perf_counter() - started
    print(f"deploy bench finished in {results['seconds']:.0f} s")
    out = BUILD / ("deploy-imports.json" if args.imports_only else "deploy.json")
    out.write_text(json.dumps(results, indent=2), encoding="utf-8")
    print(f"figures written to {out.relative_to(REPO)}")


if __name__ == "__main__":
    main()
