"""The words of a text, as searches compare them: memory queries (``query_memory``) and
intents (``workflows draft``).

Words are lower-cased runs of letters and digits (``items_to_order`` is ``items``, ``to``,
``order``); a trailing plural ``s`` is dropped (``preferences`` and ``preference`` are one
word), and a short list of English stop words is ignored, so "what did I order last time?" is
``order``, ``last`` and ``time``.
"""

from __future__ import annotations

import re

_WORD = re.compile(r"[^\W_]+")

_STOP_TEXT = """
a an and any are as at be by can could did do does for from had has have how i if in into is it
its me my of on or our please return show than that the their them then there these this those to
us was we were what when where which who why will with would you your
"""
STOP_WORDS = frozenset(_STOP_TEXT.split())
"""Words that say nothing about what to look for."""


def words(text: str) -> frozenset[str]:
    """The words of ``text`` that a search compares (see the module's docstring)."""
    found = set()
    for word in _WORD.findall(text.lower()):
        if len(word) < 2 or word in STOP_WORDS:
            continue
        if len(word) > 3 and word.endswith("s") and not word.endswith("ss"):
            word = word[:-1]
        found.add(word)
    return frozenset(found)
