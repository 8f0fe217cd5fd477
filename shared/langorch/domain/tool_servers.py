"""Registered tools: MCP servers a deployment lets its blocks use (``langorch tools add``).

A registration names a tool (the name a block's ``tools_required`` uses), the server's
streamable-HTTP URL, which of its tools are allowed (empty: all), request headers whose values
live in Secrets Manager, referenced by secret id only, and what to do with a call whose outcome is
unknown after a crash. A registration never holds a credential, so it can be shown, logged and
stored beside the definitions.
"""

from __future__ import annotations

import re
import urllib.parse
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from langorch.domain.errors import LangorchError, NotFoundError
from langorch.domain.tool_policies import ToolPolicy

NAME_PATTERN = r"^[A-Za-z][A-Za-z0-9_-]{0,63}$"
"""A registered name: what ``tools_required`` lists and what a model's tool call may name."""

SECRET_REF = "secret:"  # noqa: S105 - a prefix, not a value
"""How a header value refers to a secret: ``secret:<Secrets Manager id>``."""

SECRET_VALUE_KEY = "value"  # noqa: S105 - a key name
"""The key of the secret's JSON object that holds the header value."""

IDEMPOTENCY_META_KEY = "langorch/idempotency-key"
"""Where a tool call's idempotency key is in its ``tools/call`` request's ``_meta`` (a prefixed
key, as MCP asks of implementation-specific metadata)."""

IDEMPOTENCY_HEADER = "Idempotency-Key"
"""The HTTP header carrying the same key (as the ``http`` step's calls do)."""

_HEADER_NAME = re.compile(r"^[A-Za-z0-9-]{1,64}$")


class ToolServerError(LangorchError):
    """A tool registration is invalid, or a registered tool server cannot be used."""


class UnknownToolServerError(ToolServerError, NotFoundError):
    """No tool is registered under this name."""


class ToolServerUnreachableError(ToolServerError):
    """A registered server could not be connected to, or refused the request's credentials
    (HTTP 401 or 403): the request did not run there, so it may be sent again, with the
    registration and its header secrets read afresh."""


class ToolCallOutcomeUnknownError(ToolServerError):
    """A tool call was sent before the process stopped and what came back was never recorded;
    its registration says not to send it again (``--on-unknown fail``).

    Not retryable: every attempt of the step meets the same unknown call. A person finds out
    from the server whether the call with this key took effect, then decides.

    Attributes:
        tool: The tool called.
        key: The call's idempotency key (what the server saw).
    """

    retryable = False

    def __init__(self, *, registration: str, tool: str, key: str) -> None:
        self.tool = tool
        self.key = key
        super().__init__(
            f"tool {registration}: the call to {tool} with idempotency key {key} was sent "
            "before the process stopped, and what it did was never recorded; the "
            "registration says --on-unknown fail, so it is not sent again. Ask the server "
            "whether the call with that key took effect; to send it again with the same key "
            f"(a server that remembers keys answers without repeating it), run `langorch tools "
            f"add {registration} ... --on-unknown retry` and `langorch runs redrive RUN_ID`"
        )


OnUnknown = Literal["retry", "fail"]
"""What a step does with a call whose outcome is unknown after a crash: send it again with the
same idempotency key (``retry``), or fail with :class:`ToolCallOutcomeUnknownError` (``fail``)."""


class ToolServer(BaseModel):
    """An MCP server registered as a tool.

    Attributes:
        name: The name blocks list in ``tools_required``.
        url: The server's streamable-HTTP endpoint (``http(s)://host/mcp``).
        allow: The server's tools a model may call; empty means every tool it lists.
        headers: Header name -> Secrets Manager id holding ``{"value": "<header value>"}``.
        description: Free text shown by ``langorch tools list``.
        on_unknown: A call whose outcome is unknown after a crash: sent again with the same
            idempotency key (``retry``), or failing the step (``fail``).
        policies: Tool-call rules over calls of this server's tools, whichever workflow makes
            them (:mod:`langorch.domain.tool_policies`, the precedence of places).
        cost_per_call_usd: What one call of the server's tools costs (US dollars), counted in
            the step's and the run's cost and in the workflow's budgets.
        tool_costs: A tool's own cost per call, over ``cost_per_call_usd``.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(pattern=NAME_PATTERN)
    url: str
    allow: tuple[str, ...] = ()
    headers: dict[str, str] = Field(default_factory=dict)
    description: str = Field(default="", max_length=500)
    on_unknown: OnUnknown = "retry"
    policies: tuple[ToolPolicy, ...] = ()
    cost_per_call_usd: float = Field(default=0.0, ge=0, le=1000)
    tool_costs: dict[str, float] = Field(default_factory=dict)

    @field_validator("url")
    @classmethod
    def _http_url(cls, url: str) -> str:
        parts = urllib.parse.urlsplit(url)
        if parts.scheme not in {"http", "https"} or not parts.hostname:
            raise ValueError(f"must be an http(s) URL with a host, not {url!r}")
        if parts.username or parts.password:
            # A credential in the URL would be stored and shown: headers take secrets.
            raise ValueError("must not carry a user or password; use --header NAME=secret:ID")
        return url

    @field_validator("allow")
    @classmethod
    def _tool_names(cls, allow: tuple[str, ...]) -> tuple[str, ...]:
        bad = [name for name in allow if not re.match(NAME_PATTERN, name)]
        if bad:
            raise ValueError(f"tool names must match {NAME_PATTERN}: {bad}")
        return tuple(dict.fromkeys(allow))

    @field_validator("headers")
    @classmethod
    def _secret_ids(cls, headers: dict[str, str]) -> dict[str, str]:
        for header, secret_id in headers.items():
            if not _HEADER_NAME.match(header):
                raise ValueError(f"header name {header!r} is not a valid HTTP header name")
            if not secret_id or secret_id.startswith(SECRET_REF) or len(secret_id) > 512:
                raise ValueError(f"header {header}: give the secret id, not {secret_id!r}")
        return headers

    @field_validator("tool_costs")
    @classmethod
    def _costs(cls, costs: dict[str, float]) -> dict[str, float]:
        bad = [f"{name}={cost}" for name, cost in costs.items() if not 0 <= cost <= 1000]
        if bad:
            raise ValueError(f"a tool's cost is 0 to 1000 US dollars a call: {bad}")
        return costs

    def call_cost(self, tool: str) -> float:
        """What one call of ``tool`` costs (US dollars; 0: nothing declared)."""
        return self.tool_costs.get(tool, self.cost_per_call_usd)

    def allows(self, tool: str) -> bool:
        """Whether a model may call the server's tool ``tool``."""
        return not self.allow or tool in self.allow

    def public(self) -> dict[str, Any]:
        """What ``tools show`` prints: the registration (secret ids, never values)."""
        return self.model_dump(mode="json")


def parse_header(option: str) -> tuple[str, str]:
    """Read ``--header NAME=secret:ID`` into ``(NAME, ID)``.

    Raises:
        ToolServerError: The option is not ``NAME=secret:ID`` (a literal value is refused:
            it would be stored in the registration).
    """
    name, sep, value = option.partition("=")
    if not sep or not name.strip():
        raise ToolServerError(f"--header {option!r}: expected NAME=secret:ID")
    if not value.startswith(SECRET_REF) or not value[len(SECRET_REF) :]:
        raise ToolServerError(
            f"--header {name.strip()}: the value must be secret:<Secrets Manager id>; store "
            f'the header value in a secret as {{"{SECRET_VALUE_KEY}": "..."}} first'
        )
    return name.strip(), value[len(SECRET_REF) :]
