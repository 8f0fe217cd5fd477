"""Who the console acts as: one operator per console, bound when it starts.

- **Locally** the operator is the OS user who started it. The start-up token (:mod:`.http`)
  proves a browser belongs to the person at that terminal: another local process, or another
  user of the machine, gets nothing without it. A laptop has no identity provider, so the
  address approval policies know that person by is what they give (``--email``); the OS user
  owns the stack's store, signing key and outbox anyway, so the console cannot bind them more
  tightly than that, and it records both.
- **Against a stack** the operator is the IAM principal of the credentials the console uses
  (STS ``GetCallerIdentity``, through the container's adapter). Their address is the
  principal's session or user name when it is an email address (IAM Identity Center names
  sessions so), and nothing else: no flag can change it.

The operator decides approvals as themselves, and only where the approval names them
(compared canonically). Deciding on another approver's behalf is the admin override
(``langorch console --admin``): off by default, said on every page, audited.
"""

from __future__ import annotations

import getpass
from dataclasses import dataclass
from typing import Any, Protocol

from langorch.domain.approvals.record import Approval
from langorch.domain.errors import LangorchError
from langorch.domain.identities import IdentityError, canonical_identity

CHANNEL = "console"
"""How the console names itself in audit lines and timeline events."""

_LOCAL = "OS user"
_IAM = "IAM principal"


class OperatorError(LangorchError):
    """The console cannot tell who its operator is (or was told something it cannot accept)."""


class Principals(Protocol):
    """The port the console asks whose AWS credentials it holds (the container's ``caller``)."""

    def principal_arn(self) -> str:
        """The caller's IAM ARN."""
        ...


@dataclass(frozen=True)
class Operator:
    """The person a console acts for.

    Attributes:
        principal: who they are to the machine: the OS user, or the IAM principal's ARN.
        source: ``"OS user"`` or ``"IAM principal"``.
        address: the email address approval policies know them by (``None``: none known, so
            they decide nothing except by the admin override).
        admin: the admin override is on (decide on an approver's behalf, audited).
    """

    principal: str
    source: str
    address: str | None = None
    admin: bool = False

    @property
    def actor(self) -> str:
        """The operator and the channel, as timeline events name who acted (``console:ana``)."""
        return f"{CHANNEL}:{self.principal}"

    @property
    def described(self) -> str:
        """The operator in words, for pages and audit lines (``ana (OS user)``)."""
        return f"{self.principal} ({self.source})"

    def approver_in(self, approval: Approval) -> str | None:
        """The address ``approval`` names this operator by (as it is spelled there), if any.

        Compared canonically (case, display names, ``+tag``, look-alike letters): the
        approval's own comparison, so a spelling cannot make the operator someone else.
        """
        if self.address is None:
            return None
        return next((a for a in approval.named() if approval.same_person(a, self.address)), None)

    def may_decide_for(self, approval: Approval) -> list[str]:
        """The addresses this operator may decide ``approval`` as: themselves where named; with
        the admin override, any address the approval names (themselves first)."""
        own = self.approver_in(approval)
        if not self.admin:
            return [own] if own else []
        return ([own] if own else []) + [a for a in approval.named() if a != own]


def local_operator(*, address: str | None = None, admin: bool = False) -> Operator:
    """The OS user at this terminal.

    Args:
        address: the address approval policies list them under (``--email``).
        admin: the admin override.

    Raises:
        OperatorError: the address is not one person's email address.
    """
    try:
        user = getpass.getuser()
    except (KeyError, OSError):  # no login name (a container without a passwd entry)
        user = "unknown user"
    return Operator(user, _LOCAL, _address(address) if address else None, admin)


def stack_operator(principals: Principals, *, admin: bool = False) -> Operator:
    """The IAM principal whose credentials the console uses against a stack.

    Raises:
        OperatorError: the principal cannot be read (no credentials, STS unreachable).
    """
    try:
        arn = principals.principal_arn()
    except LangorchError as exc:
        raise OperatorError(f"the console cannot tell who you are: {exc}") from exc
    return Operator(arn, _IAM, address_of_principal(arn), admin)


def operator_of(container: Any, *, address: str | None = None, admin: bool = False) -> Operator:
    """The operator of a console on ``container``'s stack: the OS user for the local stack, the
    IAM principal otherwise.

    Raises:
        OperatorError: ``address`` given against a stack (IAM says who you are there), or the
            principal cannot be read.
    """
    if container.settings.local_home:
        return local_operator(address=address, admin=admin)
    if address:
        raise OperatorError(
            "--email is for the local stack: against a stack you are your IAM principal "
            "(its session name, when that is your address)"
        )
    return stack_operator(container.caller, admin=admin)


def address_of_principal(arn: str) -> str | None:
    """The email address an IAM principal's ARN carries, if any.

    ``arn:aws:sts::1:assumed-role/Role/ana@example.com`` (an IAM Identity Center session) and
    ``arn:aws:iam::1:user/ana@example.com`` carry one; ``…:user/ana`` and a role session named
    ``botocore-session-1`` do not.
    """
    resource = arn.split(":", 5)[-1]
    name = resource.rsplit("/", 1)[-1]
    try:
        canonical_identity(name)
    except IdentityError:
        return None
    return name


def _address(text: str) -> str:
    try:
        canonical_identity(text)
    except IdentityError as exc:
        raise OperatorError(f"--email {text[:80]!r} {exc.reason}; {exc.hint}") from None
    return text.strip()
