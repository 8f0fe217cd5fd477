"""``langorch`` as a process: what a shell sees."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def test_a_reader_that_goes_away_ends_the_command_quietly_with_sigpipe_status(tmp_path: Path):
    # Given `langorch … | head`, where the reader has already closed its end of the pipe
    read_end, write_end = os.pipe()
    os.close(read_end)
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(REPO / "shared"), str(REPO)]),
        "LANGORCH_HOME": str(tmp_path / "no-stack"),
    }
    env.pop("LANGORCH_ENDPOINT_URL", None)

    # When a command prints its result into that pipe
    try:
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "langorch.cli.main",
                "workflows",
                "validate",
                str(REPO / "examples" / "blog_review" / "definitions.yaml"),
            ],
            stdout=write_end,
            stderr=subprocess.PIPE,
            env=env,
            cwd=tmp_path,
            timeout=120,
            check=False,
        )
    finally:
        os.close(write_end)

    # Then it stops without a word, with the status a shell gives a command killed by SIGPIPE
    assert done.stderr.decode() == ""
    assert done.returncode == 141


def test_every_command_accepts_home_before_or_after_its_name() -> None:
    from langorch.cli.main import build_parser

    parser = build_parser()
    assert parser.parse_args(["--home", "/srv/a", "runs", "list"]).home == "/srv/a"
    assert parser.parse_args(["runs", "list", "--home", "/srv/b"]).home == "/srv/b"
    assert parser.parse_args(["dev", "--home", "/srv/c"]).home == "/srv/c"
    assert parser.parse_args(["workflows", "list"]).home is None
