"""Titles and names cannot reorder themselves (issue 35 item 8).

A right-to-left override in a title (``Pay invoice U+202E fdp.exe``) displays the rest of it
reversed (``Pay invoice exe.pdf``): a spoof. The approval page, the emails and the console print
every string through one function of the web layer (``web.look.shown``), which shows each
bidirectional control as U+FFFD; form values posted back as they came are left untouched.
"""

from __future__ import annotations

from typing import Any

import pytest

from langorch.console.http import Request, Sessions
from tests.unit.approvals_support import ALICE, FakeStack, call, event

RLO = "\u202e"
CONTROLS = "\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069"
SPOOF = f"Pay invoice {RLO}fdp.exe"
SHOWN = "Pay invoice \ufffdfdp.exe"
NOTE = "\u200f\u05e9\u05dc\u05d5\u05dd"  # RLM, then "shalom" in Hebrew
"""An editable value whose right-to-left mark is the person's data."""


def test_the_approval_page_shows_bidi_controls_in_its_title_neutralised(
    stack: FakeStack, callback: Any
) -> None:
    # Given an approval titled with a right-to-left override and every other bidi control
    parked = stack.park(title=SPOOF + CONTROLS, editable={"note": NOTE})

    # When the approver opens the page
    page = call(callback, event(parked.links[ALICE]))["body"]

    # Then no bidi control is in the page but the editable value's own mark, kept as given
    assert SHOWN in page
    assert [c for c in page if c in CONTROLS] == ["\u200f"]
    assert f"\n{NOTE}</textarea>" in page


def test_the_approval_email_shows_bidi_controls_in_its_title_neutralised(
    stack: FakeStack,
) -> None:
    # Given an approval titled with a right-to-left override
    stack.park(title=SPOOF + CONTROLS)

    # When its emails are written, Then subject and bodies show the controls neutralised
    mail = stack.container.email.sent[0]
    for text in (mail.subject, mail.text, mail.html):
        assert SHOWN in text
        assert not any(c in CONTROLS for c in text)


@pytest.mark.parametrize("path", ["/approvals", "/approvals/{id}"])
def test_the_console_shows_bidi_controls_in_titles_neutralised(stack: FakeStack, path: str) -> None:
    from langorch.console.app import ConsoleApp
    from langorch.console.operator import Operator

    # Given an approval titled with a right-to-left override, and a signed-in operator
    parked = stack.park(title=SPOOF)
    sessions = Sessions(b"k" * 32, token="start-up-token")
    operator = Operator("ana", "OS user", "ana@example.com")
    console = ConsoleApp(stack.container, "the test stack", frozenset(), operator, sessions)
    signed_in = sessions.open("start-up-token") or ""

    # When the console lists it and shows it
    page = console.handle(
        Request("GET", path.format(id=parked.approval_id), {}, {}, session=signed_in)
    )

    # Then the title is shown with the override neutralised
    body = page.body.decode("utf-8")
    assert page.status == 200
    assert SHOWN in body and RLO not in body
