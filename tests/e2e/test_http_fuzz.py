"""Generated bad requests against every HTTP route of the local stack: never a 5xx.

Hypothesis builds requests for ``POST /hooks/{id}`` and ``GET|HEAD|POST /approvals/{id}`` —
wrong methods, missing and garbage headers, bodies that are not UTF-8, JSON nested up to 3,000
levels or holding NaN, Infinity, 1e999 or a lone surrogate escape, forms with a thousand
fields, stale and forged signatures, real links with one part changed — and sends them through
the local gateway to the real handlers. Every answer must be a 2xx-4xx: bad input is the
sender's problem, never the server's. The number of cases run is printed (``-s``).
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any
from urllib.parse import parse_qsl, quote, urlencode, urlsplit

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from langorch.composition.bootstrap import build_container
from langorch.local.stack import LocalStack
from tests.support.stacks import running_stack

from .test_walkthrough import DEFINITIONS, request, signed_headers, started_waiting

CASES = {"webhook": 0, "approval": 0}
EXAMPLES = 150
FUZZ = settings(
    max_examples=EXAMPLES,
    deadline=None,
    derandomize=True,  # the same cases on every run: a failure is reproducible, CI is stable
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalStack]:
    home = tmp_path_factory.mktemp("fuzz") / ".langorch"
    with running_stack(home, definitions=DEFINITIONS) as running:
        yield running
    print(f"\nHTTP fuzz: {CASES['webhook']} webhook and {CASES['approval']} approval requests")


@pytest.fixture(scope="module")
def parked(stack: LocalStack) -> dict[str, str]:
    """A real run parked on an approval: its link, for requests built from a valid one."""
    container = build_container(stack.settings)
    _, link = started_waiting(stack, container, "e2e_review")
    secret = container.secrets.get_json(stack.settings.webhook_secret_prefix + "e2e_review")
    return {"link": link, "secret": secret["current"]}


# -- strategies --------------------------------------------------------------------------------

hostile_json = st.builds(
    # Depth, non-finite numbers and surrogate escapes (issue 35): 2xx or 4xx, never a 5xx.
    lambda opens, leaf: '{"item": 1, "x": ' + opens + leaf + "]" * len(opens) + "}",
    st.one_of(st.integers(0, 70), st.integers(190, 300), st.integers(900, 3000)).map(
        lambda depth: "[" * depth
    ),
    st.sampled_from(["NaN", "Infinity", "-Infinity", "1e999", '"\\ud800"', '"\\udc00x"', "1"]),
)
header_text = st.text(
    alphabet=st.characters(min_codepoint=0x20, max_codepoint=0xFF, blacklist_characters="\x7f"),
    max_size=300,
)
bodies = st.one_of(
    st.binary(max_size=2048),
    st.text(max_size=2048).map(lambda s: s.encode("utf-8")),
    st.just(b"\xff\xfe\x00{not utf-8"),
    st.just(b"{" * 5000),
    st.just("&".join(f"f{i}=v" for i in range(1000)).encode()),
    st.just(json.dumps({"item": "x" * 300_000}).encode()),
    st.just(b'{"item": 1}'),
    st.just(b"[]"),
    hostile_json.map(str.encode),
)
content_types = st.sampled_from(
    [
        None,
        "application/json",
        "application/x-www-form-urlencoded",
        "application/x-www-form-urlencoded; charset=latin-1",
        "text/plain",
        "multipart/form-data; boundary=x",
        "application/json; charset=utf-16",
    ]
)


def _headers(content_type: str | None, extra: dict[str, str]) -> dict[str, str]:
    headers = dict(extra)
    if content_type is not None:
        headers["Content-Type"] = content_type
    return headers


def _expect_no_5xx(status: int, body: bytes, what: str) -> None:
    assert 200 <= status < 500, f"{what} answered {status}: {body[:300]!r}"


# -- webhook ------------------------------------------------------------------------------------


@FUZZ
@given(
    workflow=st.one_of(st.just("e2e_review"), st.text(min_size=1, max_size=80)),
    method=st.sampled_from(["POST", "POST", "POST", "GET", "PUT"]),
    body=bodies,
    content_type=content_types,
    signing=st.sampled_from(["valid", "stale", "garbage", "missing", "old-style"]),
    garbage=st.dictionaries(
        st.sampled_from(["webhook-id", "webhook-timestamp", "webhook-signature", "X-Custom"]),
        header_text,
        max_size=3,
    ),
)
def test_no_generated_webhook_request_gets_a_5xx(
    stack: LocalStack,
    parked: dict[str, str],
    workflow: str,
    method: str,
    body: bytes,
    content_type: str | None,
    signing: str,
    garbage: dict[str, str],
) -> None:
    CASES["webhook"] += 1
    text = body.decode("utf-8", "replace")
    headers: dict[str, str] = {}
    if signing == "valid":
        headers = signed_headers(parked["secret"], f"fz-{uuid.uuid4().hex}", text)
        body = text.encode("utf-8")
    elif signing == "stale":
        headers = signed_headers(parked["secret"], "fz-stale", text)
        headers["webhook-timestamp"] = str(int(datetime.now(UTC).timestamp()) - 3600)
    elif signing == "garbage":
        headers = garbage
    elif signing == "old-style":
        headers = {"X-Langorch-Signature": "v1=00", "X-Langorch-Delivery": "d"}
    headers.pop("Content-Type", None)
    url = f"{stack.settings.public_base_url}/hooks/{quote(workflow, safe='')}"

    status, answer = request(url, method, body, _headers(content_type, headers))

    _expect_no_5xx(status, answer, f"{method} /hooks/{workflow!r} ({signing})")


# -- approvals ----------------------------------------------------------------------------------


def _mutated_query(link: str, key: str | None, value: str) -> str:
    parts = urlsplit(link)
    query = dict(parse_qsl(parts.query))
    if key is not None:
        query[key] = value
    return urlencode(query)


@FUZZ
@given(
    method=st.sampled_from(["GET", "HEAD", "POST", "POST", "POST", "PUT", "DELETE"]),
    real_id=st.booleans(),
    fake_id=st.text(min_size=1, max_size=120),
    query_key=st.sampled_from([None, "sig", "exp", "ap", "kid", "extra"]),
    query_value=st.text(max_size=200),
    body=st.one_of(
        bodies,
        st.dictionaries(
            st.sampled_from(["nonce", "decision", "comment", "code", "edit.restaurant", "x"]),
            st.one_of(st.text(max_size=500), hostile_json),
            max_size=6,
        ).map(lambda form: urlencode(form).encode()),
    ),
    content_type=content_types,
)
def test_no_generated_approval_request_gets_a_5xx(
    stack: LocalStack,
    parked: dict[str, str],
    method: str,
    real_id: bool,
    fake_id: str,
    query_key: str | None,
    query_value: str,
    body: bytes,
    content_type: str | None,
) -> None:
    CASES["approval"] += 1
    link = urlsplit(parked["link"])
    path = link.path if real_id else f"/approvals/{quote(fake_id, safe='')}"
    query = _mutated_query(parked["link"], query_key, query_value)
    url = f"{stack.settings.public_base_url}{path}?{query}"
    payload: bytes | None = body if method in ("POST", "PUT") else None

    status, answer = request(url, method, payload, _headers(content_type, {}))

    _expect_no_5xx(status, answer, f"{method} {path} ({query_key}, {len(body)} bytes)")


def test_the_parked_run_is_still_consistent_after_the_fuzz(
    stack: LocalStack, parked: dict[str, str]
) -> None:
    # After everything above, the approval is either still pending or decided once, and the
    # run agrees with it: no request left it half-written.
    container = build_container(stack.settings)
    approval_id = urlsplit(parked["link"]).path.rsplit("/", 1)[-1]
    approval = container.approvals.get(approval_id)
    assert approval is not None
    run: Any = container.runs.get_run(approval.run_id)
    if approval.status.value == "pending":
        assert run.status.value == "waiting_approval"
    else:
        assert approval.status.value in ("approved", "rejected")
