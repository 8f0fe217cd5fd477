"""The approval link-signing keys, kept in Secrets Manager (rotation: several keys verify).

Secret shape: ``{"current": KEY_ID, "keys": {KEY_ID: base64 key, ...}}``; ``current`` signs new
links and every listed key verifies, so links signed before a rotation keep working until they
expire.
"""

from __future__ import annotations

import base64
import secrets as random_source
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from langorch.domain.errors import StorageError

if TYPE_CHECKING:
    from langorch.app.ports import SecretsStore

MIN_KEY_BYTES = 32


@dataclass(frozen=True)
class SigningKeys:
    """The link-signing keys: ``current`` signs new links, every key in ``keys`` verifies."""

    current: str
    keys: dict[str, bytes] = field(repr=False)

    @property
    def current_key(self) -> bytes:
        """The key new links are signed with."""
        return self.keys[self.current]


def key_entries(value: dict[str, Any]) -> tuple[Any, Any]:
    """The secret's current key id and its keys (id -> base64), oldest first.

    Two shapes: ``{"current": KEY_ID, "keys": {KEY_ID: key, ...}}`` (what rotation writes), and
    the flat ``{"current": "k1", "k1": key}`` Secrets Manager generates when the stack creates
    the secret (CloudFormation generates flat JSON only).
    """
    if "keys" in value:
        return value.get("current"), value.get("keys")
    return value.get("current"), {k: v for k, v in value.items() if k != "current"}


def load_signing_keys(secrets: SecretsStore, name: str) -> SigningKeys:
    """Read ``{"current": KEY_ID, "keys": {KEY_ID: base64 key, ...}}`` (or the flat shape of
    :func:`key_entries`) from the secret.

    Raises:
        SecretNotFoundError: the secret does not exist (create it with
            :func:`ensure_signing_key`).
        StorageError: the secret is not of that shape.
    """
    current, raw = key_entries(secrets.get_json(name))
    if not isinstance(current, str) or not isinstance(raw, dict) or current not in raw:
        raise StorageError(
            f"secret {name} must be {{'current': KEY_ID, 'keys': {{KEY_ID: base64 key}}}} "
            "with the current key among the keys"
        )
    keys: dict[str, bytes] = {}
    for key_id, encoded in raw.items():
        try:
            key = base64.b64decode(str(encoded), validate=True)
        except ValueError as exc:
            raise StorageError(f"secret {name}: key {key_id} is not base64") from exc
        if len(key) < MIN_KEY_BYTES:
            raise StorageError(f"secret {name}: key {key_id} is shorter than {MIN_KEY_BYTES} bytes")
        keys[str(key_id)] = key
    return SigningKeys(current=current, keys=keys)


def ensure_signing_key(
    secrets: SecretsStore,
    name: str,
    *,
    key_id: Callable[[], str] = lambda: "k1",
    token_bytes: Callable[[int], bytes] = random_source.token_bytes,
) -> str:
    """Create the link-signing secret with one fresh random key when it is missing.

    Used by the local stack (CDK creates the secret in AWS). An existing secret is left as is.

    Returns:
        The current key id.
    """
    # Asked with ``exists`` rather than by catching SecretNotFoundError from a read: a read
    # of a missing secret surfaces as a StorageError through Powertools' provider.
    if secrets.exists(name):
        return load_signing_keys(secrets, name).current
    kid = key_id()
    key = base64.b64encode(token_bytes(MIN_KEY_BYTES)).decode("ascii")
    secrets.put_json(
        name, {"current": kid, "keys": {kid: key}}, description="langorch approval link signing"
    )
    return load_signing_keys_fresh(secrets, name).current


def load_signing_keys_fresh(secrets: SecretsStore, name: str) -> SigningKeys:
    """:func:`load_signing_keys`, bypassing the per-process cache (just after a write)."""
    current, raw = key_entries(secrets.get_json(name, fresh=True))
    return SigningKeys(
        current=str(current),
        keys={k: base64.b64decode(str(v)) for k, v in raw.items()},
    )
