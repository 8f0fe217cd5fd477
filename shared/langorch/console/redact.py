"""What the console shows of run data: secrets redacted, long values cut, plain text.

A key whose name says it holds a secret is shown as :data:`REDACTED`, whatever its value; a
string that carries a signed approval link, a bearer credential or a well-known key prefix is
redacted too. The console never reads task tokens or signing keys into pages at all (they are
not in the records it renders); this is the second line, for what a workflow itself put in
its state.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

REDACTED = "•••• redacted"
MAX_VALUE_CHARS = 2_000

_SECRET_KEY = re.compile(
    r"(secret|token|passw(or)?d|api[_-]?key|authori[sz]ation|signature|credential|"
    r"private[_-]?key|cookie|session|^sig$|^code$)",
    re.IGNORECASE,
)
_SECRET_TEXT = re.compile(
    r"([?&]sig=|\bBearer\s+\S{8,}|\bsk-[A-Za-z0-9_-]{12,}|\bwhsec_[A-Za-z0-9+/=]{8,}|"
    r"\bAKIA[0-9A-Z]{16}\b|-----BEGIN [A-Z ]*PRIVATE KEY-----)"
)


def is_secret_key(key: str) -> bool:
    """Whether a key's name says its value is a secret (``api_key``, ``webhook_secret``, …)."""
    return bool(_SECRET_KEY.search(key))


def redact(value: Any, *, key: str = "") -> Any:
    """``value`` with every secret-named key's value and every secret-looking string replaced.

    Args:
        value: JSON-like data (mappings, lists, scalars).
        key: the key ``value`` is stored under (its name may mark it secret).
    """
    if key and is_secret_key(key):
        return REDACTED
    if isinstance(value, Mapping):
        return {str(k): redact(v, key=str(k)) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [redact(v) for v in value]
    if isinstance(value, str) and _SECRET_TEXT.search(value):
        return REDACTED
    return value


def shown(value: Any, *, key: str = "", limit: int = MAX_VALUE_CHARS) -> str:
    """A value as text for a page: redacted, JSON for structures, cut at ``limit`` characters."""
    clean = redact(value, key=key)
    text = (
        clean
        if isinstance(clean, str)
        else json.dumps(clean, indent=2, default=str, ensure_ascii=False)
    )
    return text if len(text) <= limit else text[: limit - 1] + "…"


def redacted_url(url: str) -> str:
    """A URL as a page may show it: the value of each secret-named query parameter redacted
    (``?api_key=••••``), and the whole URL when it carries a signed link or a credential."""
    from urllib.parse import unquote_plus

    if _SECRET_TEXT.search(url):
        return REDACTED
    base, mark, query = url.partition("?")
    if not mark:
        return url
    # Split by hand, not parse/encode: what is not a secret is shown exactly as it was sent.
    kept = []
    for pair in query.split("&"):
        name, equals, _ = pair.partition("=")
        kept.append(f"{name}=••••" if equals and is_secret_key(unquote_plus(name)) else pair)
    return f"{base}?{'&'.join(kept)}"
