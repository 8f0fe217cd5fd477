"""Webhook signatures speak Standard Webhooks: what the official library signs verifies here,
in a ±5 min window, under any of the workflow's secrets, and nothing else does."""

from __future__ import annotations

import base64
from collections.abc import Callable
from datetime import UTC, datetime

import pytest
from standardwebhooks import Webhook, WebhookVerificationError

from langorch.domain.errors import SignatureError
from langorch.domain.webhooks import (
    ID_HEADER,
    SIGNATURE_HEADER,
    TIMESTAMP_HEADER,
    format_secret,
    sign,
    standard_secret,
    verify,
)

NOW = 1_795_000_000
BODY = b'{"amount": 42, "note": "caf\xc3\xa9"}'
SECRET = format_secret(b"langorch-unit-test-webhook-key-1")
OTHER = format_secret(b"langorch-unit-test-webhook-key-2")

# The Standard Webhooks specification's published test vector.
VECTOR_SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
VECTOR_ID = "msg_p5jXN8AQM9LWM0D4loKWxJek"
VECTOR_TIMESTAMP = 1614265330
VECTOR_BODY = b'{"test": 2432232314}'
VECTOR_SIGNATURE = "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="


def official(secret: str, msg_id: str, body: bytes, timestamp: int) -> dict[str, str]:
    """Headers exactly as the official ``standardwebhooks`` library has a sender make them."""
    when = datetime.fromtimestamp(timestamp, UTC)
    return {
        "webhook-id": msg_id,
        "webhook-timestamp": str(timestamp),
        "webhook-signature": Webhook(secret).sign(msg_id, when, body.decode()),
    }


def _verify(
    headers: dict[str, str], body: bytes = BODY, secrets: tuple[str, ...] = (SECRET,)
) -> str:
    return verify(headers, body, secrets, now=NOW, tolerance_seconds=300)


def test_a_delivery_signed_by_the_official_library_verifies_and_gives_its_id():
    # Given headers made by the standardwebhooks library
    headers = official(SECRET, "dlv-1", BODY, NOW)

    # When they are verified, then the delivery id comes back
    assert _verify(headers) == "dlv-1"


def test_the_specifications_test_vector_verifies():
    # Given the spec's published delivery, received within the window
    headers = {
        "webhook-id": VECTOR_ID,
        "webhook-timestamp": str(VECTOR_TIMESTAMP),
        "webhook-signature": VECTOR_SIGNATURE,
    }

    # When it is verified, then it passes
    got = verify(
        headers, VECTOR_BODY, [VECTOR_SECRET], now=VECTOR_TIMESTAMP + 10, tolerance_seconds=300
    )
    assert got == VECTOR_ID


def test_sign_reproduces_the_specifications_test_vector():
    # Given the spec's delivery, when langorch signs it, then the signature is the spec's
    headers = sign(VECTOR_SECRET, VECTOR_ID, VECTOR_BODY, timestamp=VECTOR_TIMESTAMP)
    assert headers == {
        ID_HEADER: VECTOR_ID,
        TIMESTAMP_HEADER: str(VECTOR_TIMESTAMP),
        SIGNATURE_HEADER: VECTOR_SIGNATURE,
    }


def test_what_langorch_signs_the_official_library_verifies():
    # Given headers from sign(), stamped with the real clock (the library's verify reads it)
    now = int(datetime.now(UTC).timestamp())
    headers = sign(SECRET, "dlv-1", BODY, timestamp=now)

    # When the official library verifies them, then it accepts and parses the body
    assert Webhook(SECRET).verify(BODY, headers) == {"amount": 42, "note": "caf\u00e9"}
    with pytest.raises(WebhookVerificationError):
        Webhook(OTHER).verify(BODY, headers)


@pytest.mark.parametrize("skew", [-300, 300])
def test_the_edge_of_the_window_is_accepted_either_way(skew: int):
    # Given a delivery signed exactly five minutes away from the server clock
    headers = official(SECRET, "dlv-1", BODY, NOW + skew)

    # When it is verified, then it passes
    assert _verify(headers) == "dlv-1"


@pytest.mark.parametrize("skew", [-301, 301])
def test_stale_or_future_deliveries_are_refused(skew: int):
    # Given a delivery signed one second past the window, in the past or the future
    headers = official(SECRET, "dlv-1", BODY, NOW + skew)

    # When it is verified, then it is refused
    with pytest.raises(SignatureError, match="away from the server's clock"):
        _verify(headers)


def test_a_tampered_body_does_not_verify():
    # Given a signed delivery whose body changed by one byte
    headers = official(SECRET, "dlv-1", BODY, NOW)

    # When verified, then it is refused
    with pytest.raises(SignatureError, match="does not verify"):
        _verify(headers, body=BODY.replace(b"42", b"43"))


def test_a_wrong_secret_does_not_verify():
    # Given a delivery signed with another secret
    headers = official(OTHER, "dlv-1", BODY, NOW)

    # When verified against the workflow's secret, then it is refused
    with pytest.raises(SignatureError, match="does not verify"):
        _verify(headers)


def test_a_changed_delivery_id_does_not_verify():
    # Given a signed delivery replayed under another delivery id
    headers = official(SECRET, "dlv-1", BODY, NOW)
    headers["webhook-id"] = "dlv-2"

    # When verified, then it is refused (the id is part of what is signed)
    with pytest.raises(SignatureError, match="does not verify"):
        _verify(headers)


def test_the_previous_secret_still_verifies_after_a_rotation():
    # Given a delivery signed with the previous secret
    headers = official(OTHER, "dlv-1", BODY, NOW)

    # When verified against current and previous, then it passes
    assert _verify(headers, secrets=(SECRET, OTHER)) == "dlv-1"


@pytest.mark.parametrize(
    "header",
    [
        # a sender mid-rotation signs under the old and the new secret
        pytest.param("{old} {good}", id="old-and-new-secret"),
        # an asymmetric signature, a non-base64 one and a bare token are ignored
        pytest.param("v1a,abc= v1,%%%% nonsense {good}", id="other-versions-or-not-base64"),
        # two webhook-signature headers that API Gateway joined as "first, second"
        pytest.param("{good}, {old}", id="repeated-header-joined-with-commas"),
    ],
)
def test_one_matching_signature_among_other_entries_is_enough(header: str):
    # Given a webhook-signature header holding the valid signature among other entries
    good = official(SECRET, "dlv-1", BODY, NOW)["webhook-signature"]
    old = official(OTHER, "dlv-1", BODY, NOW)["webhook-signature"]
    headers = official(SECRET, "dlv-1", BODY, NOW)
    headers["webhook-signature"] = header.format(good=good, old=old)

    # When verified against the receiver's secret, then the matching one counts
    assert _verify(headers) == "dlv-1"


@pytest.mark.parametrize("case", [str.lower, str.upper, str.title])
def test_header_names_are_case_insensitive(case: Callable[[str], str]):
    # Given headers in lower case (API Gateway v2), upper case or title case
    headers = {case(k): v for k, v in official(SECRET, "dlv-1", BODY, NOW).items()}

    # When verified, then it passes
    assert _verify(headers) == "dlv-1"


@pytest.mark.parametrize("missing", ["webhook-id", "webhook-timestamp", "webhook-signature"])
def test_a_missing_header_is_refused_naming_it(missing: str):
    # Given signed headers without one of them
    headers = official(SECRET, "dlv-1", BODY, NOW)
    del headers[missing]

    # When verified, then the refusal names the header
    with pytest.raises(SignatureError, match=f"missing (or malformed )?{missing}"):
        _verify(headers)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"webhook-id": "x" * 201}, "at most"),
        ({"webhook-id": "d\u00e9j\u00e0"}, "printable ASCII"),
        ({"webhook-timestamp": "yesterday"}, "unix seconds"),
        ({"webhook-timestamp": "1795000000.5"}, "unix seconds"),
        ({"webhook-signature": "v1=abc"}, "malformed webhook-signature"),
        ({"webhook-signature": "v1,\u00e9\u00e9"}, "malformed webhook-signature"),
        ({"webhook-signature": "v1," + base64.b64encode(b"x" * 32).decode()}, "does not verify"),
    ],
)
def test_malformed_headers_are_refused_with_what_to_send(change: dict[str, str], message: str):
    # Given signed headers with one of them malformed
    headers = {**official(SECRET, "dlv-1", BODY, NOW), **change}

    # When verified, then it is a SignatureError (a 401), never another exception (a 500)
    with pytest.raises(SignatureError, match=message):
        _verify(headers)


def test_a_sender_still_using_the_old_headers_is_told_what_changed():
    # Given a delivery with the pre-Standard-Webhooks headers only
    headers = {
        "X-Langorch-Delivery": "dlv-1",
        "X-Langorch-Timestamp": str(NOW),
        "X-Langorch-Signature": "v1=" + "0" * 64,
    }

    # When verified, then the refusal names the new headers
    with pytest.raises(SignatureError, match="Standard Webhooks; send webhook-id"):
        _verify(headers)


def test_a_body_that_is_not_utf8_is_refused_as_unsigned():
    # Given a delivery whose body is not UTF-8 (UTF-16 JSON)
    headers = official(SECRET, "dlv-1", BODY, NOW)

    # When verified, then it is a 401 saying to send UTF-8
    with pytest.raises(SignatureError, match="not UTF-8"):
        _verify(headers, body='{"amount": 42}'.encode("utf-16"))


def test_a_secret_from_before_standard_webhooks_keeps_verifying_as_its_text():
    # Given a stored secret without the whsec_ prefix (made before langorch spoke the spec)
    legacy = "Zx3-legacy_token_urlsafe_value_Q"

    # When a sender signs with its whsec_ form, the text's bytes as the key
    assert standard_secret(legacy) == "whsec_" + base64.b64encode(legacy.encode()).decode()
    headers = official(standard_secret(legacy), "dlv-1", BODY, NOW)

    # Then it verifies against the stored secret, and whsec_ secrets pass through unchanged
    assert _verify(headers, secrets=(legacy,)) == "dlv-1"
    assert standard_secret(SECRET) == SECRET


def test_a_stored_secret_that_is_not_base64_is_skipped_not_an_error():
    # Given a current secret whose base64 is broken and a valid previous one
    headers = official(SECRET, "dlv-1", BODY, NOW)

    # When verified, then the broken one cannot match and the valid one still does
    assert _verify(headers, secrets=("whsec_%%%", SECRET)) == "dlv-1"
    with pytest.raises(SignatureError, match="does not verify"):
        _verify(headers, secrets=("whsec_%%%",))


def test_new_secrets_are_whsec_base64_of_32_random_bytes():
    # Given two fresh secrets
    from langorch.app.trigger_sync import new_webhook_secret

    first, second = new_webhook_secret(), new_webhook_secret()

    # Then each is whsec_ + base64 of 32 bytes, they differ, and the library accepts them
    for secret in (first, second):
        assert secret.startswith("whsec_")
        assert len(base64.b64decode(secret.removeprefix("whsec_"), validate=True)) == 32
        Webhook(secret)
    assert first != second
