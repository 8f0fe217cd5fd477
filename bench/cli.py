"""Issue 26: what each ``langorch`` command costs a person at a terminal against a local home.

Starts ``langorch dev`` on a new home with the repository's examples, starts one run of
``blog_review`` (it parks on its approval, so the approval commands have one to show), then runs
each command below ``--repeat`` times in a fresh interpreter and prints, per command, the median
wall time, the median CPU time of the process, and what ``python -X importtime`` says its imports
cost (one more run), with the heaviest top-level packages it loaded. Target (issue 26): every
command <= 0.3 s of wall on a quiet host; ``quiet s`` estimates it (the wall x 0.5 / the host
loop's seconds before the run). Compare only readings taken at a similar host speed.

Figures (2-core host shared with six other sessions, load 11-16). Before: the tree before
the Settings, Jinja2 and botocore changes of 2026-11-27; after: with them. Each command ran
3 times per tree, the trees interleaved so both saw the same load; median wall / CPU seconds,
and the wall scaled to a quiet host (x 0.5 / the host loop's 4.07 s wall, measured just before):

==========================  =============  =============  ====================
command                     before: wall /  after: wall /  quiet wall s,
                            CPU s          CPU s          before -> after
==========================  =============  =============  ====================
``--help``                  0.46 / 0.15    0.51 / 0.15    0.06 -> 0.06
``runs list``               1.90 / 0.53    1.68 / 0.45    0.23 -> 0.21
``runs show RUN``           4.11 / 1.20    3.97 / 1.14    0.51 -> 0.49
``runs logs RUN``           1.96 / 0.63    1.33 / 0.40    0.24 -> 0.16
``workflows list``          2.15 / 0.66    1.55 / 0.47    0.26 -> 0.19
``workflows show ID``       2.66 / 0.80    1.96 / 0.70    0.33 -> 0.24
``workflows validate F``    2.33 / 0.84    2.18 / 0.78    0.29 -> 0.27
``blocks list``             2.14 / 0.67    1.58 / 0.49    0.26 -> 0.19
``tools list``              1.66 / 0.50    1.25 / 0.38    0.20 -> 0.15
``agents list``             1.79 / 0.53    1.24 / 0.38    0.22 -> 0.15
``approvals list``          1.57 / 0.47    1.21 / 0.36    0.19 -> 0.15
``resources list``          1.59 / 0.48    1.15 / 0.35    0.20 -> 0.14
==========================  =============  =============  ====================

What a local listing loads now: the interpreter, argparse, pydantic and the domain models it
reads (``tests/unit/test_cli_main.py`` keeps pydantic-settings, Jinja2, botocore and asyncio
off those paths). Most of what is left is pydantic building the models' schemas at import
(``domain.definitions`` and what it imports: a third of ``workflows list``).

``runs show`` asks the emulator for the run's Step Functions execution without boto3 since
2026-11-27 (``adapters/emulator_stepfunctions.py``), as cheap as ``runs list`` now. The same
host, load 15-17, this script with the host loop read beside each command (``loop s``):
``runs show`` 2.74 s wall / 0.61 s CPU at loop 6.37 s: 0.21 quiet (``runs list`` 0.23). Run
against the tree before, interleaved 4 times: 5.8-6.6 s wall before, 2.4-3.8 s after (loop
5.9-8.2 s): ~0.41 -> ~0.22 quiet. ``workflows validate F`` stays over the target (0.41-0.46
quiet, before and after alike: Jinja2 parses the templates, and the definitions' models).

2026-11-27, the listings off the definition models (``list_bodies``: the stored JSON), YAML by
LibYAML, no approval record or urllib.request under definition loading. Whole-bench runs at
load 8-16 (host loop 2.5-6 s) move by more than the change, so each command ran interleaved
with the tree before, 7 pairs, the host loop read beside each pair (median 2.8-3.4 s); wall /
CPU s, quiet s; and instructions counted by ``valgrind --tool=callgrind`` (one run each:
deterministic, load-free):

========================  ===========================  ==============  ====================
command                   before -> after wall / CPU   quiet s         instructions (G)
========================  ===========================  ==============  ====================
``workflows list``        1.96 / 0.70 -> 1.14 / 0.41   0.29 -> 0.19    1.045 -> 0.743 (-29%)
``blocks list``           1.81 / 0.65 -> 1.42 / 0.51   0.28 -> 0.22    1.033 -> 0.731 (-29%)
``workflows validate F``  2.40 / 0.94 -> 2.48 / 0.95   0.43 -> 0.41    1.495 -> 1.375 (-8%)
``runs list`` (same)      1.50 / 0.53 -> 1.38 / 0.55   0.26 -> 0.23    0.815 -> 0.810
========================  ===========================  ==============  ====================

``workflows validate`` stays over the target: it must build the definition models' schemas
(the file is validated through them; ``defer_build`` on every model measured within this host's
noise, 0-15 % of CPU, and would move the work past the runner's snapshot), import Jinja2
(templates are parsed, not compiled) and PyYAML, and load every kind (validation asks each kind
which fields it owns). What is left beyond a ``runs list`` is mostly that.

2026-11-28, validation loads what the document uses: no CKP module for a file without a
procedure, the step kinds its steps name (not all 17), the LLM provider and tool names without
the providers, no ``logging``. Instructions by ``valgrind --tool=callgrind`` (one run each,
deterministic), against a ``langorch dev`` home with the examples unless "offline" (a home with
no stack: the README's first validate on a fresh clone):

=================================  ===========================  =========
command                            instructions (G), before ->   change
                                   after
=================================  ===========================  =========
``workflows validate`` blog        1.382 -> 1.283                -7.2 %
``workflows validate`` seed 000    1.304 -> 1.204                -7.7 %
(the README's, 4 files)
``workflows validate`` blog,       1.336 -> 1.210                -9.4 %
offline
=================================  ===========================  =========

``workflows list`` (0.748 G), ``blocks list`` (0.736 G), ``runs list`` (0.813 G) and
``--help`` (0.237 G) import exactly the same modules before and after (checked), so they cost
the same. Wall clock said little that
night (host loop 18-29 s, ~40-60x a quiet host): interleaved 5 pairs per command, quiet s
before -> after: validate blog 0.32 -> 0.31, seed 000 0.40 -> 0.31, workflows list 0.23 ->
0.22, blocks list 0.18 -> 0.21, runs list 0.20 -> 0.23, ``--help`` 0.05 -> 0.06 (the last
four run unchanged code: that is the noise). By the instructions (0.30 s per G, this host's
quiet ratio of 2026-11-27) ``workflows validate`` is ~0.36-0.38 s quiet: still over the target.
The next morning, host loop 0.8-1.2 s (load ~1.5): the README's seed-000 validate 0.71-0.87 s
wall, ``runs list`` 0.43-0.48 s: ~0.36 and ~0.22 quiet. What is left beyond a
listing: pydantic building the definition models (~50 classes; typing.ForwardRef compiles
each string annotation: ~1,100 ``compile`` calls, ~5 %), Jinja2's import for a ``{{ }}``
template, the source dataclasses and namedtuples generate (~410 ``exec``, ~15 % of all
instructions, two thirds in pydantic and annotated_types), PyYAML.

2026-11-28, an offline validate reads no YAML and no settings: the built-in blocks come from
``builtins/blocks.json`` (generated from ``blocks.yaml``; a test checks they agree) and
PyYAML is imported only for a YAML document; with nothing to talk to, the target is refused
before the ``Settings`` model is built; offline, the known tools are the built-in names, not
the tool registry's module (its models). Instructions by ``valgrind --tool=callgrind`` (one run
each after a warm-up, .pyc files written; offline, as the README's first validate runs):

====================================  ======  =======  ===========  ==========  ========  =======
command                               before  no YAML  no settings  tool names  change    quiet s
====================================  ======  =======  ===========  ==========  ========  =======
``workflows validate`` seed 000       1.133   1.044    1.014        0.9995      -11.8 %   ~0.30
(the README's 4 JSON files)
``workflows validate`` blog_review    1.206   1.206    1.175        1.160       -3.8 %    ~0.35
(``definitions.yaml``)
``runs list`` (a local home's store)  0.818                         0.818       0         ~0.25
``--help``                            0.238                         0.238       0         ~0.07
====================================  ======  =======  ===========  ==========  ========  =======

Instructions in G, after each of the three commits in turn (``runs list`` and ``--help`` run
through ``python -c`` with the tree on ``sys.path``, both trees alike; the validate rows through
``.venv/bin/langorch``). Quiet seconds at 0.30 s per G.
The seed-000 validate is now at the target; blog_review is not: its YAML file needs PyYAML
(~90 M instructions to import) and its ``{{ }}`` templates Jinja2 (~90 M), on top of
pydantic's fixed cost (~425 M: its import, the first model's machinery, and its plugin scan
through ``importlib.metadata``, ~100 M, which only ``PYDANTIC_DISABLE_PLUGINS`` skips).

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
QUIET_LOOP = 0.5
"""Seconds the host-speed loop takes on a quiet host: ``quiet s`` is the wall time scaled by
it (wall x 0.5 / the loop's seconds before the run), the figure issue 26's target speaks of."""
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
        # The README's validate of seed 000's blocks and plan (a schedule: croniter checks it).
        [
            "workflows",
            "validate",
            *(
                str(ROOT / "examples" / "seed000" / f"{name}.json")
                for name in ("query_memory", "open_uber_eats", "add_to_cart_generic", "lunch_plan")
            ),
        ],
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
    # Compiled modules cached, as an installed CLI has them: Python reads any non-empty
    # PYTHONDONTWRITEBYTECODE (even "0") as "do not write", so it is removed, not set.
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    loop = host_speed()
    print(f"host speed: a fixed Python loop in {loop:.2f} s (0.5 s on a quiet host)")
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
        print(
            f"{'command':<28} {'wall s':>7} {'loop s':>6} {'quiet s':>7} {'cpu s':>6} "
            f"{'imports s':>9}  heaviest imports (s)"
        )
        for command in commands(run_id, approval_id):
            full = [*langorch(home), *command]
            loop = host_speed()  # beside each command: the host's speed moves under load
            readings = [timed(full, env) for _ in range(args.repeat)]
            codes = {code for _, _, code in readings}
            imports, heaviest = import_cost(full, env)
            name = " ".join(Path(part).name if "/" in part else part for part in command)
            name = name if len(name) <= 28 else name[:25] + "..."
            wall = statistics.median(r[0] for r in readings)
            print(
                f"{name:<28} {wall:>7.2f} {loop:>6.2f} {wall * QUIET_LOOP / loop:>7.2f} "
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
