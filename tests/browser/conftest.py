"""What the browser tests share: one Chromium for the package (``tests/support/browser.py``)."""

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


@pytest.fixture(scope="package")
def browser() -> Iterator[Any]:
    """One Chromium for the browser tests' modules (a launch is ~1 s of CPU); each module opens
    its contexts. Not for the session: an idle Chromium kept through other packages' tests on
    the same worker costs more than a launch."""
    with playwright_sync.sync_playwright() as p:
        launched = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        yield launched
        launched.close()
