"""Why an approval link or its form is refused: the base of those errors, and the unreadable
decision.

Apart from :mod:`langorch.domain.approvals.record` (which re-exports both) so the approver edits'
checks (:mod:`langorch.domain.approvals.edits`, whose editable types a workflow's approval step
names) raise them without importing the approval record's models: loading a workflow definition
never builds those (issue 26: ``langorch workflows validate`` in 0.3 s).
"""

from __future__ import annotations

from langorch.domain.errors import RequestRejectedError


class ApprovalLinkError(RequestRejectedError):
    """Base of the refusals of an approval link or its form; the message is for developers and
    logs, the approver's page for each is chosen at the web edge (:mod:`langorch.web.errors`)."""


class InvalidDecisionError(ApprovalLinkError):
    """The form carried no valid decision or an edit that cannot be read; the message names
    what it carried."""
