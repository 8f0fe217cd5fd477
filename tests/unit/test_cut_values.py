"""Edits never act on cut values (issue 35 item 5).

A long value of a large approval request is stored cut to 4,000 characters with a marker
(``domain.limits.bounded_request``), so the approval never holds the whole value. Before, the
page (and the console's decide form) still offered it for editing, and fixing one typo stored
the 4,049-character cut text, marker included, over the 30,000-character value. Now it is shown
read-only, saying why and how to change it, and a POST that edits it anyway is refused.
"""

from __future__ import annotations

from typing import Any

from langorch.domain.limits import bounded_request
from tests.unit.approvals_support import ALICE, FakeStack, call, event, open_and_decide

WHOLE = "The supplier's terms, clause by clause. " * 750
"""30,000 characters."""


def cut_editable() -> dict[str, Any]:
    """The editable values as a run stores them when its approval shows a long value twice
    (context and editable): the request is over its budget, so long values are cut."""
    request = {
        "step_id": "review",
        "context": {"terms": WHOLE},
        "editable": {"terms": WHOLE, "amount": 1200},
    }
    return dict(bounded_request(request)["editable"])


def test_a_value_shown_cut_is_not_offered_for_editing_and_the_page_says_how(
    stack: FakeStack, callback: Any
) -> None:
    # Given an approval whose editable terms were cut to 4,000 characters to be stored
    editable = cut_editable()
    assert len(WHOLE) == 30_000 and len(editable["terms"]) < 4_100
    parked = stack.park(editable=editable)

    # When the approver opens the page
    page = call(callback, event(parked.links[ALICE]))["body"]

    # Then the terms have no input (the amount still has one), and the page says why and how
    assert 'name="edit.terms"' not in page
    assert 'name="edit.amount"' in page
    assert "shown cut, and saving it would keep only the part shown" in page
    assert f"langorch runs fork {parked.run_id} --at review --set terms=JSON" in page


def test_a_post_editing_a_value_shown_cut_is_refused_and_nothing_is_stored(
    stack: FakeStack, callback: Any
) -> None:
    # Given the approval with the cut terms, and a form that edits them anyway (an older page
    # offered the cut text; one typo fixed)
    editable = cut_editable()
    parked = stack.park(editable=editable)
    fixed = editable["terms"].replace("clause by clause", "clause after clause", 1)

    # When it is posted
    _, answer = open_and_decide(callback, parked.links[ALICE], "approved", **{"edit.terms": fixed})

    # Then it is refused with a 422 naming the field, and nothing is decided, stored or sent
    assert answer["statusCode"] == 422
    assert "The field terms is shown cut, so it cannot be edited here" in answer["body"]
    approval = stack.container.approvals.get(parked.approval_id)
    assert approval is not None and approval.is_pending and approval.edits == {}
    assert stack.steps.sent == []


def test_the_consoles_decide_form_shows_a_value_cut_read_only_with_how_to_edit_it(
    stack: FakeStack,
) -> None:
    from langorch.console.actions import approval_form

    # Given the approval with the cut terms
    parked = stack.park(editable=cut_editable())
    approval = stack.container.approvals.get(parked.approval_id)
    assert approval is not None

    # When the console builds its decide form
    fields = {f["key"]: f for f in approval_form(approval, None)["editable"]}

    # Then the terms are read-only with the way to change them; the amount stays editable
    assert fields["terms"]["too_long"] is True
    assert "--set terms=JSON" in fields["terms"]["why"]
    assert fields["amount"]["too_long"] is False
