"""Issue 26: what each ``langorch`` command costs a person at a terminal against a local home.

Starts ``langorch dev`` on a new home with the repository's examples, starts one run of
``blog_review`` (it parks on its approval, so the approval commands have one to show), then runs
each command below ``--repeat`` times in a fresh interpreter and prints, per command, the median
wall time, the median CPU time of the process, and what ``python -X importtime`` says its imports
cost (one more run), with the heaviest top-level packages it loaded. Target (issue 26): every
command <= 0.3 s of wall on a quiet host; compare only readings taken at a similar host speed.

Figures (2-core host shared with seven other sessions at load 15-35, so the wall times say more
about the host than the command; CPU is the process's own user + system time, median of 3):

==========================  ====================  ====================
command                     before: CPU / wall s  after: CPU / wall s
==========================  ====================  ====================
``--help``                  0.22 / 1.0            0.15 / 2.5
``runs --help``             0.33 / 1.5            0.18 / 3.3
``runs list``               1.10 / 8.6            0.61 / 10.3
``runs show RUN``           1.39 / 11.9           1.19 / 19.1
``runs logs RUN``           1.18 / 10.2           0.71 / 6.8
``workflows list``          1.18 / 9.4            0.92 / 20.5
``workflows show ID``       1.18 / 7.7            1.03 / 14.5
``workflows validate F``    1.42 / 9.7            1.23 / 17.5
``blocks list``             1.18 / 9.1            0.93 / 14.6
``tools list``              1.09 / 10.3           0.63 / 8.2
``agents list``             0.93 / 8.9            0.59 / 8.7
``approvals list``          1.10 / 12.0           0.73 / 15.4
``resources list``          1.02 / 8.2            0.74 / 10.4
``approvals show ID``       1.11 / 5.2            0.77 / 10.0
==========================  ====================  ====================

Host speed 4.75 s before (18.1 s after that run), 18.8 s during the after run (0.5 s quiet).
What is left on a local ``runs list``: pydantic and pydantic-settings (the records' models and
``Settings``); ``workflows``/``blocks`` also load jinja2 (the definitions' template checks).

Run: ``.venv/bin/python bench/cli.py [--repeat 3]``.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
IMPORT_LINE = re.compile(r"^import time:\s+(\d+) \|\s+(\d+) \|( *)(\S+)$")


def commands(run_id: str, approval_id: str | None) -> list[list[str]]:
    """The commands measured: the README's everyday ones, with their ids filled in."""
    listed = [
        ["--help"],
        ["runs", "--help"],
        ["runs", "list"],
        ["runs", "show", run_id],
        ["runs", "logs", run_id],
        ["workflows", "list"],
        ["workflows", "show", "blog_review"],
        ["workflows", "validate", str(ROOT / "examples" / "blog_review" / "definitions.yaml")],
        ["blocks", "list"],
        ["tools", "list"],
        ["agents", "list"],
        ["approvals", "list"],
        ["resources", "list"],
    ]
    if approval_id:
        listed.append(["approvals", "show", approval_id])
    return listed


def langorch(home: Path) -> list[str]:
    return [sys.executable, "-m", "langorch.cli.main", "--home", str(home)]


def timed(command: list[str], env: dict[str, str]) -> tuple[float, float, int]:
    """Run ``command`` once: its wall seconds, CPU seconds (user + system) and exit code."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    began = time.perf_counter()
    done = subprocess.run(command, capture_output=True, env=env, cwd=ROOT, check=False)
    wall = time.perf_counter() - began
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu, done.returncode


def import_cost(command: list[str], env: dict[str, str]) -> tuple[float, list[str]]:
    """Seconds ``-X importtime`` counts for the command's imports, and its heaviest packages."""
    done = subprocess.run(
        [command[0], "-X", "importtime", *command[1:]],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
        check=False,
    )
    total = 0
    packages: dict[str, int] = {}
    for line in done.stderr.splitlines():
        found = IMPORT_LINE.match(line)
        if found is None:
            continue
        self_us, cumulative_us, indent, name = found.groups()
        if len(indent) == 1:  # a top-level import: its cumulative figure counts it all
            total += int(cumulative_us)
        top = name.split(".")[0]
        packages[top] = packages.get(top, 0) + int(self_us)
    heaviest = sorted(packages, key=packages.__getitem__, reverse=True)[:4]
    return total / 1e6, [f"{p} {packages[p] / 1e6:.2f}" for p in heaviest]


def start_dev(home: Path, env: dict[str, str]) -> subprocess.Popen[bytes]:
    """``langorch dev`` on ``home`` with the examples, on free ports; returns once it is ready."""
    sys.path.insert(0, str(ROOT / "shared"))
    from langorch.local.stack import free_port

    process = subprocess.Popen(
        [
            *langorch(home),
            "dev",
            "--port",
            str(free_port()),
            "--emulator-port",
            str(free_port()),
            "--console-port",
            "0",
            "--examples",
            str(ROOT / "examples"),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        env=env,
        cwd=ROOT,
    )
    assert process.stdout is not None
    for line in process.stdout:
        if b"is ready in" in line:
            print(f"  {line.decode().strip()}")
            return process
    raise RuntimeError("langorch dev ended before it was ready")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from _support import fake_aws_environment, host_speed

    fake_aws_environment()
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "0"}
    print(f"host speed: a fixed Python loop in {host_speed():.2f} s (0.5 s on a quiet host)")
    home = Path(tempfile.mkdtemp(prefix="langorch-bench-cli-"))
    dev = start_dev(home, env)
    try:
        started = subprocess.run(
            [
                *langorch(home),
                "--json",
                "runs",
                "start",
                "blog_review",
                "--input",
                '{"commit_message": "Add S3 offload"}',
                "--wait",
            ],
            capture_output=True,
            text=True,
            env=env,
            cwd=ROOT,
            check=True,
        )
        run_id = json.loads(started.stdout)["runs"][0]["run"]["run_id"]
        approvals = subprocess.run(
            [*langorch(home), "--json", "approvals", "list"],
            capture_output=True,
            text=True,
            env=env,
            cwd=ROOT,
            check=True,
        )
        listed = json.loads(approvals.stdout)
        listed = listed.get("approvals", []) if isinstance(listed, dict) else listed
        approval_id = listed[0]["approval_id"] if listed else None
        print(f"{'command':<28} {'wall s':>7} {'cpu s':>6} {'imports s':>9}  heaviest imports (s)")
        for command in commands(run_id, approval_id):
            full = [*langorch(home), *command]
            readings = [timed(full, env) for _ in range(args.repeat)]
            codes = {code for _, _, code in readings}
            imports, heaviest = import_cost(full, env)
            name = " ".join(command)
            name = name if len(name) <= 28 else name[:25] + "..."
            print(
                f"{name:<28} {statistics.median(r[0] for r in readings):>7.2f} "
                f"{statistics.median(r[1] for r in readings):>6.2f} {imports:>9.2f}  "
                f"{', '.join(heaviest)}" + ("" if codes == {0} else f"  (exit {codes})")
            )
    finally:
        dev.terminate()
        dev.wait(timeout=60)
    print(f"host speed: the same loop in {host_speed():.2f} s, after")
    return 0


if __name__ == "__main__":
    sys.exit(main())
