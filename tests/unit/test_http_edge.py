"""HTTP only at the edge: errors in ``domain/`` and ``app/`` say what happened, and one table in
``web/errors.py`` says how the edges answer (status code, a page's title and sentence).

The walks below keep it so: a new error that a request can meet needs a row (or a written reason
why no request meets it) before the suite passes, so it never silently becomes a 500; and no
status code or page wording creeps back into the domain or the use-cases.
"""

from __future__ import annotations

import ast
import importlib
import pkgutil
import re
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

import langorch
from langorch.app.approvals.channels import ChannelNotConfiguredError
from langorch.app.approvals.rotation import KeyRotationError
from langorch.app.memory import MemoryTooLargeError
from langorch.app.replay import NoRecordError
from langorch.app.workflow_tests import UnscriptedApprovalError, UnscriptedCallError
from langorch.domain._jinja_sandbox import ExpressionLimitError
from langorch.domain.agents import AgentError
from langorch.domain.approvals.edits import EditRejectedError
from langorch.domain.approvals.lifecycle import TransitionRefusedError
from langorch.domain.approvals.outcomes import (
    AlreadyDecided,
    Decided,
    DecisionHeld,
    DecisionNotDeliveredError,
    FormAgain,
    Shown,
    Voted,
)
from langorch.domain.approvals.record import (
    AlreadyDecidedError,
    Approval,
    ApprovalStatus,
    CodeMismatchError,
    EmailNotSentError,
    new_approval,
)
from langorch.domain.artifacts import ArtifactError, ArtifactTooLargeError
from langorch.domain.ckp.actions import ActionError
from langorch.domain.ckp.errors import ActionFailedError
from langorch.domain.drafting import NoMatchingBlocksError
from langorch.domain.errors import (
    FileReadError,
    LangorchError,
    LLMError,
    RunNotFinishedError,
    StepFailedError,
    StepTimeoutError,
    StorageError,
    TaskClosedError,
    UnknownInterruptError,
)
from langorch.domain.identities import IdentityError
from langorch.domain.runs import InvalidTransitionError
from langorch.domain.s3_notifications import S3EventError
from langorch.domain.templates import TemplateError
from langorch.domain.tool_servers import ToolServerError
from langorch.domain.triggers import StartedRun
from langorch.web.errors import (
    ERRORS,
    OUTCOMES,
    REFUSED,
    answer_for,
    http_status,
    outcome_status,
    sentence_of,
    title_of,
)
from tests.unit.approvals_support import ALICE, an_approval_request

SHARED = Path(langorch.__file__).resolve().parent

NOW = datetime(2025, 3, 1, 9, tzinfo=UTC)


def _approval() -> Approval:
    request = an_approval_request(1, approvers=[ALICE], timeout=3600)
    return new_approval(run_id="run-1", workflow_id="wf", request=request, now=NOW)


# The packages whose errors a request can meet: the use-cases behind the webhook route, the
# approval page and the console, the rules they apply, and the web edge itself.
AT_THE_EDGE = ("langorch.domain", "langorch.app", "langorch.web")

NEVER_AT_AN_EDGE: dict[type[LangorchError], str] = {
    StorageError: "a backend failed: not the request's fault, the platform answers 5xx",
    TaskClosedError: "Step Functions stopped waiting: the approval use-cases turn it into "
    "TooLateError or a redelivery",
    TransitionRefusedError: "the approval lifecycle's refusal: the use-cases turn it into a "
    "named refusal of the link",
    IdentityError: "an address that is not one: the delegation use-case turns it into "
    "DelegationRefusedError",
    EmailNotSentError: "SES refused for good: the mail set-up's fault, raised by the state "
    "machine's request task",
    FileReadError: "a read_file step, inside a run",
    LLMError: "a provider, inside a run",
    StepFailedError: "a step, inside a run",
    StepTimeoutError: "a step, inside a run",
    TemplateError: "a template rendered inside a run (a bad one is a DefinitionError first)",
    ExpressionLimitError: "a template rendered inside a run",
    ToolServerError: "a tool server called inside a run",
    MemoryTooLargeError: "a save_memory step, inside a run",
    RunNotFinishedError: "a run driven in-process (the CLI's --local, tests)",
    InvalidTransitionError: "a run's record moved by its own segments",
    UnknownInterruptError: "a resume the runner or a redrive addressed; the console answers "
    "it as a refusal of what the operator asked",
    S3EventError: "an S3 event to the trigger function, never an HTTP request",
    KeyRotationError: "langorch approvals rotate-key, a CLI command",
    AgentError: "langorch agents add|show|remove, CLI commands; an agent called inside a run",
    ActionError: "a CKP procedure's built-in action, inside a run",
    ActionFailedError: "a CKP step's action, inside a run",
    ChannelNotConfiguredError: "an approval naming a chat the stack has no app for: raised by "
    "the state machine's request task; the Slack route's container always has Slack's",
    NoMatchingBlocksError: "langorch workflows draft, a CLI command",
    ArtifactError: "an attach step, inside a run (the console serves only listed files)",
    ArtifactTooLargeError: "an attach step's download, inside a run",
    NoRecordError: "langorch replay, a CLI command (a call no record answers, inside a replay)",
    UnscriptedApprovalError: "langorch test, a CLI command (a case's scripted people)",
    UnscriptedCallError: "langorch test, a CLI command (a case's scripted tools and HTTP)",
}
"""Named errors no HTTP request meets, each with the reason; every other one needs a row."""


def _errors_defined_in(packages: tuple[str, ...]) -> Iterator[type[LangorchError]]:
    for package in packages:
        module = importlib.import_module(package)
        for info in pkgutil.walk_packages(module.__path__, f"{package}."):
            importlib.import_module(info.name)
    seen: set[type[LangorchError]] = set()
    pending = [LangorchError]
    while pending:
        for sub in pending.pop().__subclasses__():
            if sub not in seen:
                seen.add(sub)
                pending.append(sub)
    yield from sorted(
        (e for e in seen if e.__module__.startswith(packages)), key=lambda e: e.__qualname__
    )


def _has_row(error: type[BaseException]) -> bool:
    return any(cls in ERRORS for cls in error.__mro__)


def _exempt(error: type[BaseException]) -> bool:
    return any(cls in NEVER_AT_AN_EDGE for cls in error.__mro__)


@pytest.mark.parametrize("error", list(_errors_defined_in(AT_THE_EDGE)), ids=lambda e: e.__name__)
def test_every_error_a_request_can_meet_has_a_row(error: type[LangorchError]) -> None:
    # Given a named error of the domain, the use-cases or the web edge
    # When the edge looks it up
    # Then it has an answer (its own row or its family's), or a written reason no request meets it
    assert _has_row(error) or _exempt(error), (
        f"{error.__module__}.{error.__name__} has no row in langorch.web.errors.ERRORS: give it "
        "its status (and a page's title and sentence if a person reads it), or add it to "
        "NEVER_AT_AN_EDGE here with the reason no request meets it"
    )


def _approval_refusals() -> list[type[LangorchError]]:
    from functions.approval_callback.handler import REFUSALS

    return [
        error
        for error in _errors_defined_in(AT_THE_EDGE)
        if issubclass(error, REFUSALS) and not _exempt(error)
    ]


@pytest.mark.parametrize("error", _approval_refusals(), ids=lambda e: e.__name__)
def test_every_refusal_the_approval_page_shows_has_its_own_words(
    error: type[LangorchError],
) -> None:
    # Given an error the approval callback answers with a page
    # When its row is read
    row = ERRORS.get(error)
    # Then the row is its own, with a title and a sentence for the approver
    assert row is not None, f"{error.__name__}: the approver would read its family's words"
    assert row.title != REFUSED.title and row.sentence != REFUSED.sentence


def test_only_an_undelivered_decision_is_answered_with_a_5xx() -> None:
    # Given every row of the table
    # When their statuses are read
    server_side = {error for error, row in ERRORS.items() if row.status >= 500}
    # Then a request's fault is a 4xx; the one 5xx asks the approver to press again
    assert server_side == {DecisionNotDeliveredError}
    assert all(400 <= row.status < 600 for row in ERRORS.values())


def test_an_error_is_answered_by_its_nearest_row() -> None:
    # Given an error with no row of its own whose family has one
    class NewLinkRefusalError(CodeMismatchError):
        """A refusal added later."""

    # When the edge answers it
    # Then it answers as its family, not as a crash
    assert http_status(NewLinkRefusalError("x")) == 403
    assert title_of(NewLinkRefusalError("x")) == "The code does not match"


def test_an_error_without_a_row_is_not_answered() -> None:
    # Given a backend failure (not the request's fault)
    failure = StorageError("DynamoDB throttled")
    # When the edge looks it up, then it has no answer and its status cannot be asked for
    assert answer_for(failure) is None
    with pytest.raises(LookupError, match="StorageError has no HTTP answer"):
        http_status(failure)


def test_a_wrong_code_says_how_many_attempts_are_left() -> None:
    # Given a wrong code counted against the approver's link
    wrong = CodeMismatchError("approval apr-1: wrong code", attempts_left=3)
    # When the page says why the form is shown again
    # Then the sentence names the attempts left, from the error's facts
    assert sentence_of(wrong).endswith("try again. (3 attempts left.)")
    assert "attempts left" not in sentence_of(CodeMismatchError("not counted yet"))


def test_already_decided_reads_who_decided_and_when_in_its_title_and_sentence() -> None:
    # Given someone decided first
    notice = AlreadyDecidedError("apr-1", ApprovalStatus.rejected, "bob@example.com", NOW)
    # When the page for a later click is written
    # Then it says the outcome, who and when
    assert title_of(notice) == "Already rejected"
    assert sentence_of(notice) == (
        "This approval was already rejected by bob@example.com at 2025-03-01 09:00 UTC."
    )


@pytest.mark.parametrize(
    ("outcome", "status"),
    [
        (StartedRun("wf", "run-1", created=True), 202),
        (Shown(_approval(), ALICE, "view-token"), 200),
        (Decided(_approval()), 200),
        (Voted(_approval(), "1 of 2 approvals"), 200),
        (DecisionHeld(_approval()), 202),
        (AlreadyDecided(AlreadyDecidedError("apr-1", ApprovalStatus.approved, ALICE, NOW)), 200),
        (FormAgain(_approval(), ALICE, "view-token", CodeMismatchError("wrong")), 403),
        (FormAgain(_approval(), ALICE, "view-token", EditRejectedError("n", "is bad")), 422),
    ],
    ids=lambda value: type(value).__name__ if not isinstance(value, int) else str(value),
)
def test_each_outcome_is_answered_with_the_tables_status(outcome: object, status: int) -> None:
    # Given a use-case's outcome (a form shown again answers as the error that caused it)
    # When the edge answers it
    # Then its status is the table's
    assert outcome_status(outcome) == status


def test_every_outcome_row_names_an_outcome() -> None:
    # The rows of outcomes are the use-cases' answers (and an already-decided notice is one)
    assert set(OUTCOMES) == {StartedRun, Shown, Decided, DecisionHeld, AlreadyDecided}


# --------------------------------------------------------------------------------------------
# Nothing of HTTP left in domain/ and app/
# --------------------------------------------------------------------------------------------

HTTP_ATTRIBUTES = {"status", "status_code", "http_status"}
PAGE_WORDING = {"user_title", "user_message"}
HTML_TAG = re.compile(
    r"</?(html|head|body|p|div|span|a|h[1-6]|form|input|button|br|strong|em|ul|ol|li|table|tr|"
    r"td|th|label|textarea|select|option|script|style|meta|title|main|section|pre)(\s[^<>]*)?/?>",
    re.IGNORECASE,
)


def _sources() -> list[Path]:
    return sorted([*(SHARED / "domain").rglob("*.py"), *(SHARED / "app").rglob("*.py")])


def _findings(path: Path) -> Iterator[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef):
            for statement in node.body:
                targets: list[ast.expr] = []
                if isinstance(statement, ast.Assign):
                    targets = statement.targets
                elif isinstance(statement, ast.AnnAssign):
                    targets = [statement.target]
                for target in targets:
                    name = target.id if isinstance(target, ast.Name) else ""
                    is_int = isinstance(statement, ast.AnnAssign) and (
                        isinstance(statement.annotation, ast.Name)
                        and statement.annotation.id == "int"
                    )
                    literal = isinstance(statement, ast.Assign) and isinstance(
                        statement.value, ast.Constant
                    )
                    if name in HTTP_ATTRIBUTES and (is_int or literal):
                        yield f"{node.name}.{name} (line {statement.lineno})"
        name = (
            getattr(node, "name", None) or getattr(node, "id", None) or getattr(node, "attr", None)
        )
        if name in PAGE_WORDING:
            yield f"{name} (line {getattr(node, 'lineno', '?')})"
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            tag = HTML_TAG.search(node.value)
            if tag:
                yield f"HTML {tag.group(0)!r} (line {node.lineno})"


def test_no_status_code_or_page_wording_is_left_in_the_domain_or_the_use_cases() -> None:
    # Given every module of domain/ and app/
    # When their classes, names and strings are read
    found = {
        str(path.relative_to(SHARED)): hits
        for path in _sources()
        if (hits := list(_findings(path)))
    }
    # Then none declares a status code or a page's words, and none holds HTML
    left = {path: hits for path, hits in found.items() if hits}
    assert left == {}, "status codes and page wording belong in langorch/web/errors.py"


def test_the_walk_sees_a_status_attribute_and_page_wording(tmp_path: Path) -> None:
    # Given a module written the old way
    old = tmp_path / "old.py"
    old.write_text(
        "class GoneError(Exception):\n"
        "    status = 410\n"
        '    user_title = "Gone"\n'
        'PAGE = "<p>gone</p>"\n',
        encoding="utf-8",
    )
    # When it is read, then each of the three is found
    assert {hit.split(" ")[0] for hit in _findings(old)} == {
        "GoneError.status",
        "user_title",
        "HTML",
    }


# --------------------------------------------------------------------------------------------
# The console answers from the table too
# --------------------------------------------------------------------------------------------


def test_the_console_answers_a_refusal_it_has_no_row_for_as_refused() -> None:
    # Given the console and a runs filter it does not know (a FilterError, no row of its own)
    from langorch.console.app import ConsoleApp
    from langorch.console.http import Request, Sessions
    from langorch.console.operator import Operator
    from tests.fakes.approvals import InMemoryApprovals

    class Stack:
        approvals = InMemoryApprovals()  # the pending-count badge every page shows

        def clock(self) -> datetime:
            return datetime(2026, 1, 1, tzinfo=UTC)

    sessions = Sessions(b"k" * 32, token="start-up-token")
    operator = Operator("ana", "OS user", "ana@example.com")
    console = ConsoleApp(Stack(), "the test stack", frozenset(), operator, sessions)
    # When the runs page is asked for with it, by the signed-in operator
    signed_in = sessions.open("start-up-token") or ""
    response = console.handle(Request("GET", "/runs", {"status": ["bogus"]}, {}, session=signed_in))
    # Then the answer is the table's refusal, with the operator's message
    assert response.status == REFUSED.status
    assert b"Cannot do that" in response.body and b"choose one of" in response.body
