"""The console's HTTP plumbing: requests, responses, sessions, CSRF, security headers.

Nothing is answered without a session (but the package's own CSS and JavaScript), and a session
is only had by presenting the start-up token, as Jupyter does: ``langorch console`` prints a URL
that carries it once; the console checks it, sets a session cookie and redirects to the same
page without it. A second local process (a script, another user of the machine) that reaches
the port gets a refusal, not a page, a cookie or a CSRF token.

Every page is served with a strict Content-Security-Policy (scripts and styles from this
server only, nothing inline), and every state-changing request is a POST that must carry:

- the session cookie (issued for the token, signed, ``HttpOnly``, ``SameSite=Strict``),
- the form field ``csrf``: an HMAC of the session id with this process's key,
- an ``Origin`` (or, without one, a ``Referer``) of this console's own address,

and the ``Host`` header of every request must be the console's (a DNS-rebinding page cannot
talk to it under another name).
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from collections.abc import Mapping
from dataclasses import dataclass, field
from http.cookies import SimpleCookie
from urllib.parse import parse_qs, urlsplit

SESSION_COOKIE = "langorch_console"
"""The cookie's name; a console adds its port (cookies are shared by every port of a host)."""
TOKEN_PARAM = "token"  # noqa: S105 - the parameter's name, not a token
"""The query parameter of the start-up URL that carries the token."""
CSRF_FIELD = "csrf"
MAX_FORM_BYTES = 1_048_576

CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
)
SECURITY_HEADERS: dict[str, str] = {
    "Content-Security-Policy": CSP,
    "X-Frame-Options": "DENY",
    "X-Content-Type-Options": "nosniff",
    # same-origin, not no-referrer: with no-referrer Chromium sends `Origin: null` on form
    # POSTs, and the Origin check needs the real one. Other sites still get no referrer.
    "Referrer-Policy": "same-origin",
    "Cache-Control": "no-store",
    "Cross-Origin-Opener-Policy": "same-origin",
    "Cross-Origin-Resource-Policy": "same-origin",
}


class CsrfError(Exception):
    """A POST without this console's session, token or origin: refused, nothing done."""


class NoSessionError(Exception):
    """A request without a session of this console (no cookie, or one it did not issue)."""


@dataclass(frozen=True)
class Request:
    """One HTTP request to the console."""

    method: str
    path: str
    query: Mapping[str, list[str]]
    headers: Mapping[str, str]
    """Lower-cased names."""
    form: Mapping[str, list[str]] = field(default_factory=dict)
    session: str = ""

    def arg(self, name: str, default: str = "") -> str:
        """The first value of a query parameter (stripped), else ``default``."""
        values = self.query.get(name) or [default]
        return values[0].strip()

    def field(self, name: str, default: str = "") -> str:
        """The first value of a form field, else ``default``."""
        values = self.form.get(name) or [default]
        return values[0]


@dataclass
class Response:
    """What a route answers."""

    status: int = 200
    body: bytes = b""
    content_type: str = "text/html; charset=utf-8"
    headers: dict[str, str] = field(default_factory=dict)

    @classmethod
    def redirect(cls, location: str) -> Response:
        """303 See Other: after a POST, the browser GETs ``location`` (a path on this server)."""
        return cls(303, b"", headers={"Location": location})


class Sessions:
    """The start-up token, the sessions it opens and their CSRF tokens.

    Sessions are stateless: a cookie is a random id and its HMAC with this process's key, so
    only this process issues them, none survives a restart (the new process prints a new
    token), and no table of them grows.

    Args:
        key: the signing key (default: random for this process).
        token: the start-up token (default: random for this process).
    """

    def __init__(self, key: bytes | None = None, token: str | None = None) -> None:
        self._key = key or secrets.token_bytes(32)
        self.startup_token = token or secrets.token_urlsafe(32)

    def open(self, presented: str) -> str | None:
        """A new session for the start-up token (``None``: not the token)."""
        if not presented or not hmac.compare_digest(
            presented.encode(), self.startup_token.encode()
        ):
            return None
        session = secrets.token_urlsafe(24)
        return f"{session}.{self._mac('session', session)}"

    def valid(self, cookie: str) -> bool:
        """Whether a cookie's value is a session this process issued."""
        session, dot, mac = cookie.partition(".")
        return bool(session and dot) and hmac.compare_digest(
            mac.encode(), self._mac("session", session).encode()
        )

    def token(self, session: str) -> str:
        """The CSRF token of a session (stateless: an HMAC of its id)."""
        return self._mac("csrf", session)

    def _mac(self, purpose: str, value: str) -> str:
        return hmac.new(self._key, f"{purpose}:{value}".encode(), hashlib.sha256).hexdigest()

    def check(self, request: Request, origins: frozenset[str]) -> None:
        """Refuse a state-changing request that is not from this console's own page.

        Raises:
            CsrfError: no session, a wrong or missing token, or a foreign origin.
        """
        if not request.session:
            raise CsrfError("no console session: reload the page and try again")
        sent = request.field(CSRF_FIELD)
        if not sent or not hmac.compare_digest(sent.encode(), self.token(request.session).encode()):
            raise CsrfError("the form's token does not match this session: reload the page")
        origin = request.headers.get("origin")
        if origin is None or origin == "null":
            referer = request.headers.get("referer", "")
            parts = urlsplit(referer)
            origin = f"{parts.scheme}://{parts.netloc}" if parts.netloc else None
        if origin not in origins:
            raise CsrfError("the request came from another site: nothing was done")


def session_of(headers: Mapping[str, str], name: str = SESSION_COOKIE) -> str:
    """The session cookie's value (empty when none or malformed; :meth:`Sessions.valid` says
    whether this console issued it)."""
    raw = headers.get("cookie", "")
    if not raw:
        return ""
    cookie: SimpleCookie = SimpleCookie()
    try:
        cookie.load(raw)
    except Exception:  # a malformed Cookie header is no session, not an error page
        return ""
    morsel = cookie.get(name)
    value = morsel.value if morsel is not None else ""
    plain = value.replace("-", "").replace("_", "").replace(".", "")
    return value if 16 <= len(value) <= 128 and plain.isalnum() else ""


def session_cookie(session: str, name: str = SESSION_COOKIE) -> str:
    """The ``Set-Cookie`` value for a new session."""
    return f"{name}={session}; Path=/; HttpOnly; SameSite=Strict"


def parse_form(body: bytes) -> dict[str, list[str]]:
    """An ``application/x-www-form-urlencoded`` body (UTF-8)."""
    return parse_qs(body.decode("utf-8", "replace"), keep_blank_values=True)
