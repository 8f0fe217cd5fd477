"""The shared look of langorch's pages: one stylesheet and human labels for keys.

The console (:mod:`langorch.console`) serves ``langorch.css`` as a file; the emailed approval
page and the emails carry it inline (their CSP allows inline styles only, and an email cannot
load a stylesheet). One file, so they cannot drift apart.
"""

from __future__ import annotations

import re
from functools import lru_cache
from importlib.resources import files

STYLESHEET = "langorch.css"


@lru_cache(maxsize=1)
def stylesheet() -> str:
    """The shared stylesheet's text (read once per process)."""
    return files("langorch.web").joinpath(STYLESHEET).read_text(encoding="utf-8")


def human_label(key: str) -> str:
    """A state key as people read it: ``invoice_total`` → "Invoice total", ``dueDate`` →
    "Due date". Keys are identifiers, so this only spaces and capitalises them."""
    spaced = re.sub(r"[_\-.]+", " ", str(key)).strip()
    spaced = re.sub(r"(?<=[a-z0-9])(?=[A-Z][a-z])", " ", spaced)
    if not spaced:
        return str(key)
    words = spaced.split(" ")
    words = [w if (w.isupper() and len(w) > 1) else w.lower() for w in words]
    first = words[0]
    words[0] = first if first.isupper() else first[:1].upper() + first[1:]
    return " ".join(words)
