"""The browser tests' Chromium (Debian's, driven by Playwright) and the screenshots they keep."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
SCREENSHOTS = Path(__file__).resolve().parents[2] / "artifacts" / "console"
"""Where each page's screenshot is kept (gitignored), to be looked at."""


def shot(page: Any, name: str) -> None:
    """Keep a full-page screenshot of ``page`` as ``artifacts/console/<name>.png``."""
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.evaluate("window.scrollTo(0, 0)")
    page.screenshot(path=str(SCREENSHOTS / f"{name}.png"), full_page=True)
