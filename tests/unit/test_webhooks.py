"""The webhook signature scheme: HMAC over delivery id, timestamp and raw body, in a window."""

from __future__ import annotations

import pytest

from langorch.domain.errors import SignatureError
from langorch.domain.webhooks import SIGNATURE_HEADER, sign, signature, verify

NOW = 1_795_000_000
BODY = b'{"amount": 42}'


def _verify(headers: dict[str, str], body: bytes = BODY, secrets: tuple[str, ...] = ("s1",)) -> str:
    return verify(headers, body, secrets, now=NOW, tolerance_seconds=300)


def test_a_signed_delivery_verifies_and_gives_its_delivery_id():
    # Given headers made by sign()
    headers = sign("s1", "dlv-1", BODY, timestamp=NOW)

    # When they are verified
    delivery = _verify(headers)

    # Then the delivery id comes back
    assert delivery == "dlv-1"


def test_the_signature_is_hmac_sha256_of_id_timestamp_and_body():
    # Given the documented construction, computed independently
    import hashlib
    import hmac

    expected = hmac.new(b"s1", b"dlv-1.1795000000." + BODY, hashlib.sha256).hexdigest()

    # When the module signs the same delivery
    got = signature("s1", "dlv-1", NOW, BODY)

    # Then both agree
    assert got == expected


@pytest.mark.parametrize("skew", [-300, 300])
def test_the_edge_of_the_window_is_accepted_either_way(skew: int):
    # Given a delivery signed exactly at the tolerance away from the server clock
    headers = sign("s1", "dlv-1", BODY, timestamp=NOW + skew)

    # When it is verified, then it passes
    assert _verify(headers) == "dlv-1"


@pytest.mark.parametrize("skew", [-301, 301])
def test_outside_the_window_is_refused_either_way(skew: int):
    # Given a delivery signed one second past the tolerance
    headers = sign("s1", "dlv-1", BODY, timestamp=NOW + skew)

    # When it is verified, then it is refused
    with pytest.raises(SignatureError, match="away from the server's clock"):
        _verify(headers)


def test_one_matching_value_among_several_is_enough():
    # Given a sender that sends a stale and a current signature, comma-separated
    headers = sign("s1", "dlv-1", BODY, timestamp=NOW)
    headers[SIGNATURE_HEADER] = "v1=" + "0" * 64 + ", " + headers[SIGNATURE_HEADER]

    # When verified, then it passes
    assert _verify(headers) == "dlv-1"


def test_the_previous_secret_still_verifies():
    # Given a delivery signed with the previous secret
    headers = sign("old", "dlv-1", BODY, timestamp=NOW)

    # When verified against current and previous, then it passes
    assert _verify(headers, secrets=("new", "old")) == "dlv-1"


def test_a_changed_body_does_not_verify():
    # Given a signed delivery whose body changed by one byte
    headers = sign("s1", "dlv-1", BODY, timestamp=NOW)

    # When verified, then it is refused
    with pytest.raises(SignatureError, match="does not verify"):
        _verify(headers, body=BODY.replace(b"42", b"43"))


def test_a_changed_delivery_id_does_not_verify():
    # Given a signed delivery replayed under another delivery id
    headers = sign("s1", "dlv-1", BODY, timestamp=NOW)
    headers["X-Langorch-Delivery"] = "dlv-2"

    # When verified, then it is refused (the id is part of what is signed)
    with pytest.raises(SignatureError):
        _verify(headers)


def test_header_names_are_case_insensitive():
    # Given headers lower-cased as API Gateway v2 passes them
    headers = {k.lower(): v for k, v in sign("s1", "dlv-1", BODY, timestamp=NOW).items()}

    # When verified, then it passes
    assert _verify(headers) == "dlv-1"


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"X-Langorch-Delivery": ""}, "X-Langorch-Delivery"),
        ({"X-Langorch-Delivery": "x" * 201}, "at most"),
        ({"X-Langorch-Timestamp": "yesterday"}, "unix seconds"),
        ({"X-Langorch-Signature": "sha256=abc"}, "missing X-Langorch-Signature"),
        ({"X-Langorch-Signature": "v1=\u00e9\u00e9"}, "does not verify"),
    ],
)
def test_malformed_headers_are_refused_with_what_to_send(change: dict[str, str], message: str):
    # Given signed headers with one of them malformed
    headers = {**sign("s1", "dlv-1", BODY, timestamp=NOW), **change}

    # When verified, then it is refused with a message naming the fix
    with pytest.raises(SignatureError, match=message):
        _verify(headers)
