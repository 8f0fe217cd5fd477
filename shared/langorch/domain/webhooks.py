"""The webhook signature scheme (pure: no I/O, the clock is passed in).

A sender signs each delivery of ``POST /hooks/{workflow_id}`` with the workflow's webhook
secret and sends three headers:

``X-Langorch-Delivery``
    A delivery id the sender chooses, unique per event and **the same on every retry** of that
    event. It is the dedupe key: a repeated delivery id starts no second run.
``X-Langorch-Timestamp``
    When the delivery was signed, in unix seconds. Deliveries more than the tolerance window
    (``webhook_tolerance_seconds``, 300 s by default) away from the receiver's clock, in either
    direction, are refused, so a captured request cannot be replayed later.
``X-Langorch-Signature``
    ``v1=<hex>`` where ``<hex>`` is the lowercase hex HMAC-SHA256, keyed with the secret, of
    ``f"{delivery_id}.{timestamp}.".encode() + raw_body`` — the body exactly as sent, byte for
    byte. Several values may be sent comma-separated (``v1=…,v1=…``) while a sender moves to a
    new secret; one matching value is enough. Unknown schemes (``v0=…``) are ignored.

The secret is stored per workflow as ``{"current": "...", "previous": "..."}``: after a
rotation both verify until the next rotation, so senders can switch without a gap. Signatures
are compared with :func:`hmac.compare_digest` (constant time).
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from langorch.domain.errors import SignatureError

DELIVERY_HEADER = "X-Langorch-Delivery"
TIMESTAMP_HEADER = "X-Langorch-Timestamp"
SIGNATURE_HEADER = "X-Langorch-Signature"
SCHEME = "v1"

MAX_DELIVERY_ID_LENGTH = 200
"""Delivery ids are dedupe keys stored with the run: bounded, printable ASCII."""
MAX_SIGNATURES = 8
"""More candidate signatures than this is not a rotation, it is someone guessing."""


def signed_payload(delivery_id: str, timestamp: int | str, body: bytes) -> bytes:
    """The exact bytes a signature covers.

    Args:
        delivery_id: the ``X-Langorch-Delivery`` value.
        timestamp: the ``X-Langorch-Timestamp`` value (unix seconds).
        body: the raw request body.
    """
    return f"{delivery_id}.{timestamp}.".encode() + body


def signature(secret: str, delivery_id: str, timestamp: int | str, body: bytes) -> str:
    """The lowercase hex HMAC-SHA256 of the signed payload (without the ``v1=`` prefix)."""
    payload = signed_payload(delivery_id, timestamp, body)
    return hmac.new(secret.encode(), payload, hashlib.sha256).hexdigest()


def sign(secret: str, delivery_id: str, body: bytes, *, timestamp: int) -> dict[str, str]:
    """The headers a sender adds to a delivery (for clients and tests).

    Args:
        secret: the workflow's webhook secret.
        delivery_id: unique per event, the same on every retry of it.
        body: the exact bytes that will be sent as the body.
        timestamp: unix seconds now (the sender's clock).

    Returns:
        ``X-Langorch-Delivery``, ``X-Langorch-Timestamp`` and ``X-Langorch-Signature``.
    """
    return {
        DELIVERY_HEADER: delivery_id,
        TIMESTAMP_HEADER: str(timestamp),
        SIGNATURE_HEADER: f"{SCHEME}={signature(secret, delivery_id, timestamp, body)}",
    }


def secret_values(document: Mapping[str, Any]) -> list[str]:
    """The secrets that verify, current first, from the stored ``{"current", "previous"}``."""
    values = [document.get("current"), document.get("previous")]
    return [v for v in values if isinstance(v, str) and v]


def header(headers: Mapping[str, str], name: str) -> str | None:
    """A header value by case-insensitive name (API Gateway v2 lowercases, clients may not)."""
    wanted = name.lower()
    for key, value in headers.items():
        if key.lower() == wanted:
            return value
    return None


def delivery_id_of(headers: Mapping[str, str]) -> str:
    """The delivery id, checked for shape.

    Raises:
        SignatureError: missing, too long or not printable ASCII.
    """
    value = header(headers, DELIVERY_HEADER)
    if not value:
        raise SignatureError(f"missing {DELIVERY_HEADER} header: send a unique id per event")
    if len(value) > MAX_DELIVERY_ID_LENGTH or not (value.isascii() and value.isprintable()):
        raise SignatureError(
            f"{DELIVERY_HEADER} must be at most {MAX_DELIVERY_ID_LENGTH} printable ASCII characters"
        )
    return value


@dataclass(frozen=True)
class SignedDelivery:
    """A delivery's signature headers, checked for shape and freshness (not yet verified).

    Attributes:
        delivery_id: the ``X-Langorch-Delivery`` value.
        timestamp: the ``X-Langorch-Timestamp`` value, as sent (it is part of what is signed).
        candidates: the ``v1=`` signatures sent, lowercase hex.
    """

    delivery_id: str
    timestamp: str
    candidates: tuple[bytes, ...]

    @classmethod
    def from_headers(
        cls, headers: Mapping[str, str], *, now: float, tolerance_seconds: int
    ) -> SignedDelivery:
        """Read the headers and check the timestamp window.

        Args:
            headers: the request headers (any case).
            now: the receiver's clock, unix seconds.
            tolerance_seconds: how far the timestamp may be from ``now``, either way.

        Raises:
            SignatureError: a header is missing or malformed, or the timestamp is outside the
                window.
        """
        delivery_id = delivery_id_of(headers)
        stamp = (header(headers, TIMESTAMP_HEADER) or "").strip()
        if not stamp.isdigit() or len(stamp) > 12:
            raise SignatureError(
                f"missing or malformed {TIMESTAMP_HEADER} header: send unix seconds"
            )
        if abs(now - int(stamp)) > tolerance_seconds:
            raise SignatureError(
                f"{TIMESTAMP_HEADER} is more than {tolerance_seconds} s away from the server's "
                "clock; sign each delivery when you send it"
            )
        candidates = _candidates(header(headers, SIGNATURE_HEADER))
        if not candidates:
            raise SignatureError(
                f"missing {SIGNATURE_HEADER} header: send {SCHEME}=<hex HMAC-SHA256>"
            )
        return cls(delivery_id, stamp, tuple(candidates))

    def verifies(self, body: bytes, secrets: Iterable[str]) -> bool:
        """Whether any signature sent matches ``body`` under any of ``secrets``."""
        for secret in secrets:
            expected = signature(secret, self.delivery_id, self.timestamp, body).encode()
            if any(hmac.compare_digest(expected, c) for c in self.candidates):
                return True
        return False


def verify(
    headers: Mapping[str, str],
    body: bytes,
    secrets: Iterable[str],
    *,
    now: float,
    tolerance_seconds: int,
) -> str:
    """Check a delivery's signature headers against the workflow's secrets.

    Args:
        headers: the request headers (any case).
        body: the raw request body, exactly as received.
        secrets: the secrets that verify (current and previous).
        now: the receiver's clock, unix seconds.
        tolerance_seconds: how far the timestamp may be from ``now``, either way.

    Returns:
        The delivery id.

    Raises:
        SignatureError: a header is missing or malformed, the timestamp is outside the window,
            or no signature matches any secret.
    """
    delivery = SignedDelivery.from_headers(headers, now=now, tolerance_seconds=tolerance_seconds)
    if not delivery.verifies(body, secrets):
        raise SignatureError("the webhook signature does not verify")
    return delivery.delivery_id


def _candidates(value: str | None) -> list[bytes]:
    if not value:
        return []
    found = []
    for part in value.split(","):
        scheme, _, digest = part.strip().partition("=")
        if scheme == SCHEME and digest:
            found.append(digest.strip().lower().encode("utf-8", "replace"))
    return found[:MAX_SIGNATURES]
