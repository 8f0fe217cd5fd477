"""The shared look of langorch's pages: one stylesheet, human labels for keys, and text that
cannot reorder itself.

The console (:mod:`langorch.console`) serves ``langorch.css`` as a file; the emailed approval
page and the emails carry it inline (their CSP allows inline styles only, and an email cannot
load a stylesheet). One file, so they cannot drift apart.

Every string the approval page, the emails and the console print goes through :func:`shown`
(their templates' ``finalize``): a bidirectional control character in a title or a name
(``Pay invoice‮fdp.exe``) would make the text after it display reversed, so each is shown as
U+FFFD instead. Form values that are posted back as they came are marked :class:`Verbatim`
(the ``verbatim`` filter) and printed untouched: changing them would change the person's data.
"""

from __future__ import annotations

import re
from functools import lru_cache
from importlib.resources import files
from typing import Any

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


BIDI_CONTROLS = re.compile("[\u200e\u200f\u202a-\u202e\u2066-\u2069]")
"""The marks (LRM, RLM), embeddings and overrides (LRE, RLE, PDF, LRO, RLO) and isolates (LRI,
RLI, FSI, PDI) of Unicode's bidirectional algorithm: invisible, and able to reorder what
follows them."""
NEUTRALISED = "\ufffd"
"""What a bidirectional control is shown as: visible, so a reader sees something was there."""


class Verbatim(str):
    """Text a form posts back as it came (an editable value, what a person typed): printed
    without :func:`shown`'s neutralising."""


def verbatim(value: Any) -> Verbatim:
    """The ``verbatim`` filter: ``value`` as :class:`Verbatim` text."""
    return Verbatim("" if value is None else value)


def without_bidi(text: str) -> str:
    """``text`` with each bidirectional control character shown as U+FFFD."""
    return BIDI_CONTROLS.sub(NEUTRALISED, text)


def shown(value: Any) -> Any:
    """What a template prints (Jinja's ``finalize``): strings without bidirectional controls.

    Markup we built (it escaped what it holds) and :class:`Verbatim` form values are left as
    they are; anything else is printed as Jinja would.
    """
    if (
        isinstance(value, str)
        and not isinstance(value, Verbatim)
        and not hasattr(value, "__html__")
    ):
        return without_bidi(value)
    return value
