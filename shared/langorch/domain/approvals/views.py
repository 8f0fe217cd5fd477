"""View tokens: a form can decide only after a person had time to read the page.

Some mail scanners parse the approval page and submit its form at once. Each page view (GET)
therefore issues a fresh *view token* in the form, in place of a fixed nonce::

    {issued_at_ms}.{view_id}.{mac}

``mac`` is HMAC-SHA256 (base64url, cut to 32 characters) with the link's key over
``view\\n{approval_id}\\n{approver_ref}\\n{issued_at_ms}\\n{view_id}``, so a token is bound to one
approval, one approver and one page view, and is verified without storing it. A POST decides
only with a token that verifies, was issued at least the dwell ago (a setting, 2 s by default)
and was not used before (the store records each used ``view_id``). A faster submit is audited
as ``suspected_automated_submit`` and answered with the form again ("press again").

Pure: the clock and the random ``view_id`` are passed in.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from langorch.domain.approvals.record import ApprovalLinkError, FormExpiredError, LinkClaims

DEFAULT_FORM_DWELL_SECONDS = 2.0
"""How long after the page view a form may decide (``approval_form_dwell_seconds``)."""
CLOCK_SKEW = timedelta(seconds=5)
"""A token issued this far in the future still verifies (clocks of two Lambdas differ)."""
_TOKEN_RE = re.compile(r"^(\d{1,15})\.([A-Za-z0-9_-]{8,64})\.([A-Za-z0-9_-]{32})$")


class SubmittedTooSoonError(ApprovalLinkError):
    """The form came back faster than a person reads the page (a scanner, most likely)."""


class ViewTokenUsedError(ApprovalLinkError):
    """This page view's token already decided (or tried to): a form is good for one submit."""


class LinkReissuedError(ApprovalLinkError):
    """The link is of an earlier generation: new links were sent (``approvals reissue``)."""


@dataclass(frozen=True)
class ViewToken:
    """A verified page view: when it was issued and its one-time id."""

    issued_at: datetime
    view_id: str


def _mac(key: bytes, claims: LinkClaims, issued_ms: str, view_id: str) -> str:
    message = "\n".join(("view", claims.approval_id, claims.approver_ref, issued_ms, view_id))
    digest = hmac.new(key, message.encode("utf-8"), hashlib.sha256).digest()
    return base64.urlsafe_b64encode(digest).rstrip(b"=").decode("ascii")[:32]


def issue_view_token(claims: LinkClaims, key: bytes, *, now: datetime, view_id: str) -> str:
    """The token one page view's form carries.

    Args:
        claims: the verified link (approval and approver).
        key: the link's signing key.
        now: when the page is shown.
        view_id: a fresh random id (8-64 base64url characters), e.g. ``secrets.token_urlsafe``.
    """
    if not re.fullmatch(r"[A-Za-z0-9_-]{8,64}", view_id):
        raise ValueError("a view id is 8-64 base64url characters")
    issued_ms = str(int(now.timestamp() * 1000))
    return f"{issued_ms}.{view_id}.{_mac(key, claims, issued_ms, view_id)}"


def check_view_token(
    claims: LinkClaims, key: bytes, token: str, *, now: datetime, dwell: timedelta
) -> ViewToken:
    """Verify a form's view token and that the dwell has passed since its page view.

    Raises:
        FormExpiredError: no token, a malformed or forged one, or one of another approval or
            approver (the POST did not come from this approval's page).
        SubmittedTooSoonError: it verified but came back sooner than ``dwell`` after the view.
    """
    found = _TOKEN_RE.match(token or "")
    if found is None:
        raise FormExpiredError(f"approval {claims.approval_id}: POST without a page's view token")
    issued_ms, view_id, mac = found.groups()
    expected = _mac(key, claims, issued_ms, view_id)
    if not hmac.compare_digest(expected.encode(), mac.encode()):
        raise FormExpiredError(f"approval {claims.approval_id}: view token does not verify")
    issued_at = datetime.fromtimestamp(int(issued_ms) / 1000, tz=UTC)
    if issued_at > now + CLOCK_SKEW:
        raise FormExpiredError(f"approval {claims.approval_id}: view token from the future")
    if now - issued_at < dwell:
        raise SubmittedTooSoonError(
            f"approval {claims.approval_id}: form sent {(now - issued_at).total_seconds():.2f} s "
            f"after the page view (dwell {dwell.total_seconds():g} s)"
        )
    return ViewToken(issued_at, view_id)
