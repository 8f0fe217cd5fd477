"""The browser tests' Chromium (Debian's, driven by Playwright), the tabs they reuse and the
screenshots they keep."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
SCREENSHOTS = Path(__file__).resolve().parents[2] / "artifacts" / "console"
"""Where each page's screenshot is kept (gitignored), to be looked at."""


class Tab:
    """One tab of a browser context, reused by a module's tests, with the errors its pages log.

    Chromium spends ~1.5 s of CPU on a new context and ~0.5 s on a new tab (measured on the
    console), more than most tests spend on their pages: tests that need no cookies, clock or
    options of their own take this tab in turn (``take``) and hand it back (``give_back``).
    """

    def __init__(self, context: Any, *, ignored: str | None = None) -> None:
        """Open the tab; its console errors that contain ``ignored`` are expected ones."""
        self.page = context.new_page()
        self.errors: list[str] = []
        self.page.on("pageerror", lambda exc: self.errors.append(str(exc)))
        self.page.on(
            "console",
            lambda m: (
                self.errors.append(m.text)
                if m.type == "error" and (ignored is None or ignored not in m.text)
                else None
            ),
        )

    def take(self) -> Any:
        """The tab for the next test, with no errors logged yet."""
        self.errors.clear()
        return self.page

    def give_back(self) -> list[str]:
        """Leave the test's page (its scripts stop polling) and return the errors it logged."""
        self.page.emulate_media(color_scheme="light")
        self.page.goto("about:blank")
        return list(self.errors)


def shot(page: Any, name: str) -> None:
    """Keep a full-page screenshot of ``page`` as ``artifacts/console/<name>.png``."""
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.evaluate("window.scrollTo(0, 0)")
    page.screenshot(path=str(SCREENSHOTS / f"{name}.png"), full_page=True)
