"""What the approval page use-cases are asked: plain commands, built by whoever received them.

The approval callback builds them from API Gateway's event, the console from its own form; the
use-cases (:mod:`langorch.app.approvals.decisions`) never see a request, a header or a method
they would act on: the visitor is only written to the audit trail.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from langorch.domain.approvals.audit import Visitor


@dataclass(frozen=True)
class ViewApproval:
    """Show an approval's page to the holder of a signed link (decides nothing)."""

    approval_id: str
    link: Mapping[str, str] = field(repr=False)
    """The signed link's values (``ap``, ``exp``, ``kid``, ``sig``): verified, never logged."""
    visitor: Visitor


@dataclass(frozen=True)
class DecideApproval:
    """Decide (or vote on, or delegate) an approval with the values of its page's form."""

    approval_id: str
    link: Mapping[str, str] = field(repr=False)
    """The signed link's values, as for :class:`ViewApproval`."""
    form: Mapping[str, str] = field(repr=False)
    """The form's values: ``nonce`` (the page view's token), ``decision``, ``comment``,
    ``code``, ``edit.<key>`` and ``delegate_to``; anything else is ignored."""
    visitor: Visitor


PageCommand = ViewApproval | DecideApproval
"""Either command: what the link checks and the audit lines need of one."""
