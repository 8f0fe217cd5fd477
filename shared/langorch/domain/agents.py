"""Registered agents: the execution workers CKP nodes name (seed 001 §7, §8.1).

A CKP node says which agent does its work (``"agent": "DESKTOP"``); a deployment registers an
agent under that name (``langorch agents add DESKTOP --http URL --actions click,type``) with its
**capability contract**:

* ``supported_actions``: the catalog actions it performs (a step's ``action`` binds to the node's
  agent only when the agent lists it);
* ``execution_mode``: ``step`` (one call per step), ``batch`` (adjacent steps it supports go in one
  call, at most ``max_steps_per_batch``) or ``node`` (all of a node's steps in one call);
* ``max_duration_seconds``: the longest one call may take;
* ``resource_key`` / ``concurrency_limit``: what it drives (``desktop:vm-01:session-1``) and how
  many runs may drive it at once — the existing resource locks (seed 001 §7b).

Like a registered tool, a registration holds no credential: header values live in the secrets
store and are named by id, so a registration can be shown, logged and stored.
"""

from __future__ import annotations

import re
import urllib.parse
from enum import StrEnum
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from langorch.domain.errors import LangorchError, NotFoundError
from langorch.domain.resources import MAX_LIMIT, RESOURCE_NAME
from langorch.domain.tool_servers import SECRET_REF

AGENT_NAME = r"^[A-Za-z][A-Za-z0-9_-]{0,63}$"
"""An agent's name: what a CKP node's ``agent`` says (``WEB``, ``DESKTOP``, ``invoice-bot``)."""

ACTION_NAME = r"^[A-Za-z][A-Za-z0-9_.-]{0,127}$"
"""An action's name, as a CKP step's ``action`` writes it."""

DEFAULT_MAX_STEPS_PER_BATCH = 20
"""A batch agent's steps per call when its registration names no limit."""

DEFAULT_MAX_DURATION_SECONDS = 300
"""How long one agent call may take when the registration names no limit."""

MAX_DURATION_SECONDS = 900
"""The longest an agent call may take: a segment (a Lambda) runs at most 15 minutes."""

_HEADER_NAME = re.compile(r"^[A-Za-z0-9-]{1,64}$")


class AgentError(LangorchError):
    """An agent registration is invalid, or a registered agent cannot be used."""


class UnknownAgentError(AgentError, NotFoundError):
    """No agent is registered under this name."""


class ExecutionMode(StrEnum):
    """How much of a node an agent takes per call (seed 001 §7)."""

    step = "step"
    batch = "batch"
    node = "node"


class AgentRegistration(BaseModel):
    """A registered agent and its capability contract.

    Attributes:
        name: What CKP nodes name in ``agent``.
        transport: ``http`` (a JSON POST per call, see the README's "CKP procedures") or
            ``mcp`` (each step calls the MCP tool named like its action).
        url: The agent's endpoint.
        headers: Header name -> secrets-store id holding ``{"value": "<header value>"}``.
        supported_actions: The actions it performs.
        execution_mode: ``step``, ``batch`` or ``node``.
        max_steps_per_batch: ``batch`` mode: steps per call at most.
        max_duration_seconds: The longest one call may take.
        resource_key: What it drives; its calls hold a lease on it.
        concurrency_limit: Leases of ``resource_key`` at once (the resource's limit).
        description: Free text for ``agents list``.
        cost_per_step_usd: What the agent charges per step it performs (US dollars), counted
            in the step's and the run's cost and in the workflow's budgets.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(pattern=AGENT_NAME)
    transport: Literal["http", "mcp"] = "http"
    url: str
    headers: dict[str, str] = Field(default_factory=dict)
    supported_actions: tuple[str, ...] = Field(min_length=1)
    execution_mode: ExecutionMode = ExecutionMode.step
    max_steps_per_batch: int = Field(default=DEFAULT_MAX_STEPS_PER_BATCH, ge=1, le=1000)
    max_duration_seconds: int = Field(
        default=DEFAULT_MAX_DURATION_SECONDS, ge=1, le=MAX_DURATION_SECONDS
    )
    resource_key: str | None = None
    concurrency_limit: int | None = Field(default=None, ge=1, le=MAX_LIMIT)
    description: str = Field(default="", max_length=500)
    cost_per_step_usd: float = Field(default=0.0, ge=0, le=1000)

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

    @field_validator("supported_actions")
    @classmethod
    def _action_names(cls, actions: tuple[str, ...]) -> tuple[str, ...]:
        bad = [a for a in actions if not re.match(ACTION_NAME, a)]
        if bad:
            raise ValueError(f"action names must match {ACTION_NAME}: {bad}")
        return tuple(dict.fromkeys(actions))

    @field_validator("headers")
    @classmethod
    def _secret_ids(cls, headers: dict[str, str]) -> dict[str, str]:
        for header, secret_id in headers.items():
            if not _HEADER_NAME.match(header):
                raise ValueError(f"header name {header!r} is not a valid HTTP header name")
            if not secret_id or secret_id.startswith(SECRET_REF) or len(secret_id) > 512:
                raise ValueError(f"header {header}: give the secret id, not {secret_id!r}")
        return headers

    @field_validator("resource_key")
    @classmethod
    def _resource(cls, key: str | None) -> str | None:
        if key is not None and not RESOURCE_NAME.match(key):
            raise ValueError(
                f"{key!r} is not a resource name: letters, digits and _ . : / @ - "
                "(e.g. desktop:vm-01:session-1)"
            )
        return key

    @model_validator(mode="after")
    def _limit_needs_a_resource(self) -> AgentRegistration:
        if self.concurrency_limit is not None and self.resource_key is None:
            raise ValueError("a concurrency limit needs a resource key (--resource-key K)")
        return self

    def supports(self, action: str) -> bool:
        """Whether the agent performs ``action``."""
        return action in self.supported_actions

    def public(self) -> dict[str, Any]:
        """What ``agents show`` prints: the registration (secret ids, never values)."""
        return self.model_dump(mode="json")


class AgentCallError(AgentError):
    """An agent call got no answer, or an error status (429 and 5xx are worth another attempt).

    Raised inside a run only; the node's retries and error routes handle it.
    """

    def __init__(self, message: str, *, retryable: bool) -> None:
        self.retryable = retryable
        super().__init__(message)
