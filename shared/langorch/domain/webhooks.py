"""Webhook signatures: the Standard Webhooks scheme (pure: no I/O, the clock is passed in).

A sender signs each delivery of ``POST /hooks/{workflow_id}`` with the workflow's webhook
secret, as https://www.standardwebhooks.com specifies, so any Standard Webhooks library signs
for langorch (Python: ``standardwebhooks.Webhook(secret).sign(msg_id, timestamp, payload)``).
Three headers, any case:

``webhook-id``
    A delivery id the sender chooses, unique per event and **the same on every retry** of that
    event. It is the dedupe key: a repeated id starts no second run.
``webhook-timestamp``
    When the delivery was signed, in unix seconds. Deliveries more than the tolerance window
    (``webhook_tolerance_seconds``, 300 s by default, the spec's and the library's 5 minutes)
    away from the receiver's clock, in either direction, are refused, so a captured request
    cannot be replayed later.
``webhook-signature``
    ``v1,<base64>``: the base64 HMAC-SHA256, keyed with the secret's bytes, of
    ``f"{webhook_id}.{timestamp}.{body}"`` — the body exactly as sent. Several signatures may be
    sent space-separated (``v1,… v1,…``) while a sender moves to a new secret; one matching
    value is enough. Other versions (``v1a,…``) are ignored.

Secrets are ``whsec_`` + base64 of random bytes, the HMAC key being the decoded bytes. A secret
stored before langorch spoke Standard Webhooks has no prefix: it keeps verifying with its UTF-8
text as the key, and :func:`standard_secret` gives the ``whsec_`` form a sender's library takes
(``langorch workflows rotate-secret`` replaces it; the old one stays valid as previous).

The secret is stored per workflow as ``{"current": "...", "previous": "..."}``: after a
rotation both verify until the next rotation. Signatures are compared in constant time.
"""

from __future__ import annotations

import base64
import binascii
import hmac
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from standardwebhooks import Webhook
from standardwebhooks.webhooks import EmptyWebhookSecretError

from langorch.domain.errors import SignatureError

ID_HEADER = "webhook-id"
TIMESTAMP_HEADER = "webhook-timestamp"
SIGNATURE_HEADER = "webhook-signature"
VERSION = "v1"
SECRET_PREFIX = "whsec_"  # noqa: S105 - the spec's prefix, not a secret

LEGACY_SIGNATURE_HEADER = "X-Langorch-Signature"
"""The signature header before Standard Webhooks: named in the refusal so old senders learn why."""
MAX_DELIVERY_ID_LENGTH = 200
"""Delivery ids are dedupe keys stored with the run: bounded, printable ASCII."""
MAX_SIGNATURES = 8
"""More candidate signatures than this is not a rotation, it is someone guessing."""


def format_secret(key: bytes) -> str:
    """A Standard Webhooks secret (``whsec_`` + base64) for these key bytes."""
    return SECRET_PREFIX + base64.b64encode(key).decode("ascii")


def standard_secret(stored: str) -> str:
    """The ``whsec_`` form of a stored secret, the one a sender's library takes.

    A secret created before Standard Webhooks (no prefix) is the key as UTF-8 text; its
    ``whsec_`` form signs exactly as it verifies here.
    """
    return stored if stored.startswith(SECRET_PREFIX) else format_secret(stored.encode())


def _webhook(stored: str) -> Webhook | None:
    """The library's signer for a stored secret, or None when it cannot be a key."""
    try:
        return Webhook(standard_secret(stored))
    except (binascii.Error, ValueError, EmptyWebhookSecretError):
        return None


def sign(secret: str, delivery_id: str, body: bytes, *, timestamp: int) -> dict[str, str]:
    """The headers a sender adds to a delivery, signed by the ``standardwebhooks`` library.

    Args:
        secret: the workflow's webhook secret (``whsec_…``, or a pre-Standard-Webhooks one).
        delivery_id: unique per event, the same on every retry of it.
        body: the exact UTF-8 bytes that will be sent as the body.
        timestamp: unix seconds now (the sender's clock).

    Returns:
        ``webhook-id``, ``webhook-timestamp`` and ``webhook-signature``.

    Raises:
        ValueError: the secret is not valid base64 after ``whsec_``, or the body is not UTF-8.
    """
    signer = _webhook(secret)
    if signer is None:
        raise ValueError(f"the webhook secret is not {SECRET_PREFIX} followed by base64")
    when = datetime.fromtimestamp(timestamp, UTC)
    return {
        ID_HEADER: delivery_id,
        TIMESTAMP_HEADER: str(timestamp),
        SIGNATURE_HEADER: signer.sign(delivery_id, when, body.decode("utf-8")),
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
    """The delivery id (``webhook-id``), checked for shape.

    Raises:
        SignatureError: missing, too long or not printable ASCII.
    """
    value = header(headers, ID_HEADER)
    if not value:
        raise SignatureError(f"missing {ID_HEADER} header: send a unique id per event")
    if len(value) > MAX_DELIVERY_ID_LENGTH or not (value.isascii() and value.isprintable()):
        raise SignatureError(
            f"{ID_HEADER} must be at most {MAX_DELIVERY_ID_LENGTH} printable ASCII characters"
        )
    return value


@dataclass(frozen=True)
class SignedDelivery:
    """A delivery's signature headers, checked for shape and freshness (not yet verified).

    Attributes:
        delivery_id: the ``webhook-id`` value.
        timestamp: the ``webhook-timestamp`` value, unix seconds as digits.
        candidates: the ``v1`` signatures sent, base64-decoded.
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
        if header(headers, SIGNATURE_HEADER) is None and header(headers, LEGACY_SIGNATURE_HEADER):
            raise SignatureError(
                f"{LEGACY_SIGNATURE_HEADER} is no longer read: langorch webhooks speak Standard "
                f"Webhooks; send {ID_HEADER}, {TIMESTAMP_HEADER} and {SIGNATURE_HEADER} "
                "(any Standard Webhooks library signs them)"
            )
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
                f"missing or malformed {SIGNATURE_HEADER} header: send "
                f"{VERSION},<base64 HMAC-SHA256>"
            )
        return cls(delivery_id, str(int(stamp)), tuple(candidates))

    def verifies(self, body: bytes, secrets: Iterable[str]) -> bool:
        """Whether any signature sent matches ``body`` under any of ``secrets``.

        Raises:
            SignatureError: the body is not UTF-8 (Standard Webhooks signs the body's text).
        """
        try:
            text = body.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise SignatureError(
                "the body is not UTF-8, so no Standard Webhooks signature covers it; send UTF-8 "
                "JSON"
            ) from exc
        when = datetime.fromtimestamp(int(self.timestamp), UTC)
        for secret in secrets:
            signer = _webhook(secret)
            if signer is None:
                continue
            # The library computes the signature; its own verify() is not used because it reads
            # the wall clock with a fixed window (ours is injected and configured) and raises
            # ValueError on malformed headers, which must be 401s here, not 500s.
            _, _, encoded = signer.sign(self.delivery_id, when, text).partition(",")
            expected = base64.b64decode(encoded)
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
            the body is not UTF-8, or no signature matches any secret.
    """
    delivery = SignedDelivery.from_headers(headers, now=now, tolerance_seconds=tolerance_seconds)
    if not delivery.verifies(body, secrets):
        raise SignatureError("the webhook signature does not verify")
    return delivery.delivery_id


def _candidates(value: str | None) -> list[bytes]:
    if not value:
        return []
    found = []
    for part in value.split():
        # rstrip: API Gateway joins a repeated header's values with ", ".
        version, _, encoded = part.rstrip(",").partition(",")
        if version != VERSION or not encoded:
            continue
        try:
            found.append(base64.b64decode(encoded, validate=True))
        except (binascii.Error, ValueError):
            continue  # not base64: cannot match, and must not turn into a 500
    return found[:MAX_SIGNATURES]
