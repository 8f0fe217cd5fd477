"""The fork server's warm-up (langorch.local.sandbox_warmup) imports cleanly in a fresh
interpreter and leaves what it warms in place. The fork server swallows an ImportError of a
module it preloads, so a warm-up that broke would otherwise only show as slower sandboxes."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.subprocess  # each test starts a fresh Python; make test runs them

ROOT = Path(__file__).resolve().parents[2]


def test_the_warm_up_imports_what_sandboxes_use_first_and_compiles_the_templates():
    # Given a fresh interpreter, as the fork server is before its preloads
    script = (
        "import sys\n"
        "import langorch.local.sandbox_warmup as warm\n"
        "from langorch.web import emails, pages\n"
        "missing = [m for m in (*warm.ADAPTERS, *warm.FIRST_USE) if m not in sys.modules]\n"
        "cached = pages._env().cache, emails._env(True).cache, emails._env(False).cache\n"
        "print(missing, [len(c or {}) for c in cached])\n"
    )
    # When it imports the warm-up
    done = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env={"PYTHONPATH": f"{ROOT / 'shared'}:{ROOT}", "PATH": "/usr/bin:/bin"},
    )
    # Then every module it names is loaded, and every page and email template is compiled
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[] [5, 1, 1]", done.stdout
