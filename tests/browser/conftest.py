"""What the browser tests share: one Chromium per test module (``tests/support/browser.py``)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from playwright import sync_api as playwright_sync

from tests.support.browser import CHROMIUM

# No skip when the browser is missing: `make test` installs Debian's chromium first, and a
# browser test that skips would let the console go untested while the suite stays green.
assert Path(CHROMIUM).exists(), "Debian's chromium is missing: run `make chromium` (make test does)"


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    """One Chromium for the module; each test opens its own context (cookies, downloads)."""
    with playwright_sync.sync_playwright() as p:
        launched = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        yield launched
        launched.close()
