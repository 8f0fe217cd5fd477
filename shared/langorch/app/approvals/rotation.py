"""Rotating the approval-link signing key: a new key signs, the previous ones still verify.

The secret holds ``{"current": KEY_ID, "keys": {KEY_ID: base64 key, ...}}`` (read by
:func:`langorch.app.approvals.keys.load_signing_keys`). Links carry the id of the key that signed
them, so a link already emailed keeps verifying as long as its key stays in ``keys``: a
rotation adds a fresh key, makes it current and keeps the newest ``keep`` keys. Handlers cache
the secret for up to :data:`langorch.adapters.secrets.DEFAULT_MAX_AGE_SECONDS`, during which
they still sign with the previous key — which stays valid, so nothing breaks meanwhile.
"""

from __future__ import annotations

import base64
import re
import secrets as random_source
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from langorch.app.approvals.keys import MIN_KEY_BYTES, key_entries, load_signing_keys
from langorch.domain.errors import LangorchError

if TYPE_CHECKING:
    from langorch.app.ports import SecretsStore

DEFAULT_KEEP = 2
"""The new key and the one before it: links signed before this rotation keep working until the
next one. Rotate no more often than the longest approval timeout, or keep more."""

_NUMBERED = re.compile(r"^k(\d+)$")


class KeyRotationError(LangorchError):
    """The rotation cannot be done as asked (the message says why and what to pass)."""


@dataclass(frozen=True)
class Rotation:
    """What a rotation did (key ids only: never key material).

    Attributes:
        current: the new key id, signing links from now on.
        previous: the key id that signed until now (still verifying).
        kept: every key id that still verifies, oldest first.
        dropped: key ids removed: links they signed no longer verify.
    """

    current: str
    previous: str
    kept: tuple[str, ...]
    dropped: tuple[str, ...]


def next_key_id(existing: list[str]) -> str:
    """``k<n+1>`` after the highest ``k<n>`` in use (``k1`` for a first key)."""
    numbers = [int(m.group(1)) for key in existing if (m := _NUMBERED.match(key))]
    return f"k{max(numbers, default=0) + 1}"


def rotate_signing_key(
    secrets: SecretsStore,
    name: str,
    *,
    keep: int = DEFAULT_KEEP,
    token_bytes: Callable[[int], bytes] = random_source.token_bytes,
) -> Rotation:
    """Add a fresh key, make it current, keep the newest ``keep`` keys.

    Args:
        secrets: where the secret lives.
        name: the secret's name or ARN (``Settings.link_signing_secret``).
        keep: how many keys keep verifying, the new one included (at least 2, so links
            signed just before the rotation keep working).
        token_bytes: the random source (tests).

    Raises:
        KeyRotationError: ``keep`` is below 2.
        SecretNotFoundError: the secret does not exist.
        StorageError: the secret is not of the expected shape, or cannot be written.
    """
    if keep < 2:
        raise KeyRotationError(
            f"--keep {keep}: at least 2, or links emailed before this rotation stop working"
        )
    # Validates the shape (and every key) before anything is written.
    before = load_signing_keys(secrets, name)
    _, stored = key_entries(secrets.get_json(name, fresh=True))  # oldest first, as stored
    new_id = next_key_id(list(stored))
    material = base64.b64encode(token_bytes(MIN_KEY_BYTES)).decode("ascii")
    keys = {**{k: str(v) for k, v in stored.items()}, new_id: material}
    kept = list(keys)[-keep:]
    secrets.replace_json(name, {"current": new_id, "keys": {k: keys[k] for k in kept}})
    return Rotation(
        current=new_id,
        previous=before.current,
        kept=tuple(kept),
        dropped=tuple(k for k in keys if k not in kept),
    )
