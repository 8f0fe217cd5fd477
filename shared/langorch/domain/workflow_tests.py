"""Workflow tests as data: a ``tests.yaml`` beside a workflow, and the checks of its cases.

A tests file names the definitions it tests and lists cases. Each case gives the run's input,
what the outside world answers (the model by step or by a matcher on the prompt, registered
tools, ``http`` steps and agents, and the people deciding approvals), and what the run must do::

    definitions: [definitions.yaml]      # beside this file (default: definitions.yaml)
    workflow: blog_review                # optional when the definitions hold one workflow
    cases:
      - name: approved at the first review
        input: {commit_message: "Add a checkpointer"}
        models:                          # by step or block id: the offline script's format
          analyze: {analysis: "It adds a checkpointer."}
        prompts:                         # by the prompt's text; tried before ``models``
          - {contains: "feedback to address (may be empty): Shorter", answer: {title: T2}}
        tools:                           # registered tools by name; ``args`` narrows the match
          lookup_order: [{args: {order_id: A1}, output: '{"status": "shipped"}'}]
        http:                            # http steps and HTTP agents, by method and URL
          - {method: POST, url: "https://erp.example.com/invoices", status: 201, body: {id: 7}}
        approvals:                       # by step id, in the order they are asked
          review: [{decision: rejected, comment: Shorter}, approved]
        files: {inbox/orders.csv: orders.csv}   # read_file's bucket: key -> file beside
        expect:
          status: succeeded
          path: [analyze, draft, review, publish]     # the steps finished, in order
          outputs: {"$.title": "T2"}                  # JSONPath over the run's outputs
          that: ["body != ''"]                        # expressions over the outputs
          max_cost_usd: 0.05
          approvals: 1                                # approvals asked

Nothing here runs anything: :func:`parse_tests` checks the document (every problem with its
field path), :func:`check_case` compares what a run did with what the case expects.
"""

from __future__ import annotations

import difflib
import json
import re
from dataclasses import dataclass, field
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from langorch.domain.errors import DefinitionError, Problem

ResponseStatus = Annotated[int, Field(ge=100, le=599)]
"""A scripted HTTP response's status (test data: what a server answers a case's run)."""


class WorkflowTestsError(DefinitionError):
    """A tests file is not shaped as :mod:`langorch.domain.workflow_tests` documents."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class PromptAnswer(_Strict):
    """A model answer chosen by the prompt's text (``contains`` and/or ``matches``)."""

    contains: str | None = None
    matches: str | None = None
    """A regular expression searched in the prompt."""
    step: str | None = None
    """Only for this step (default: any)."""
    answer: dict[str, Any]

    @field_validator("matches")
    @classmethod
    def _compiles(cls, pattern: str | None) -> str | None:
        if pattern is not None:
            try:
                re.compile(pattern)
            except re.error as exc:
                raise ValueError(f"not a regular expression: {exc}") from None
        return pattern

    def hits(self, step_id: str, prompt: str) -> bool:
        """Whether this answer is for ``prompt`` at ``step_id``."""
        if self.step is not None and self.step != step_id:
            return False
        if self.contains is not None and self.contains not in prompt:
            return False
        return self.matches is None or re.search(self.matches, prompt) is not None


class ToolAnswer(_Strict):
    """What a registered tool answers; ``args`` (a subset of the call's) narrows the match."""

    args: dict[str, Any] | None = None
    output: Any = ""
    error: bool = False

    def hits(self, args: dict[str, Any]) -> bool:
        """Whether this answer is for a call with ``args``."""
        return self.args is None or all(args.get(k) == v for k, v in self.args.items())


class HttpAnswer(_Strict):
    """What an ``http`` step's (or an HTTP agent's) server answers."""

    method: str | None = None
    url: str
    """The URL, or a regular expression matched against the whole URL (``re.fullmatch``)."""
    status: ResponseStatus = 200
    body: Any = None

    def hits(self, method: str, url: str) -> bool:
        """Whether this answer is for ``method url``."""
        if self.method is not None and self.method.upper() != method.upper():
            return False
        return url == self.url or re.fullmatch(self.url, url) is not None


class Decision(_Strict):
    """A person's answer to one approval."""

    decision: Literal["approved", "rejected", "timed_out"]
    comment: str = ""
    edits: dict[str, Any] = Field(default_factory=dict)
    approver: str | None = None
    """Who decided (default: the first approver the request names)."""


class Expectations(_Strict):
    """What the run must have done; every field is optional."""

    status: Literal["succeeded", "failed", "cancelled", "waiting_approval"] | None = None
    path: list[str] | None = None
    """The steps that finished (or failed), in order."""
    visited: list[str] = Field(default_factory=list)
    not_visited: list[str] = Field(default_factory=list)
    outputs: dict[str, Any] = Field(default_factory=dict)
    that: list[str] = Field(default_factory=list)
    error: str | None = None
    """Text the run's error message must contain."""
    max_cost_usd: float | None = Field(default=None, ge=0)
    approvals: int | None = Field(default=None, ge=0)

    @field_validator("outputs")
    @classmethod
    def _paths(cls, outputs: dict[str, Any]) -> dict[str, Any]:
        for path in outputs:
            if not path.startswith("$"):
                raise ValueError(f"{path!r} is not a JSONPath; start it with $ (e.g. $.{path})")
        return outputs


class TestCase(_Strict):
    """One case: an input, the world's scripted answers, and the expectations."""

    __test__ = False  # not a pytest class

    name: str = Field(min_length=1)
    workflow: str | None = None
    """The workflow this case runs (default: the file's)."""
    input: dict[str, Any] = Field(default_factory=dict)
    models: dict[str, Any] = Field(default_factory=dict)
    prompts: list[PromptAnswer] = Field(default_factory=list)
    tools: dict[str, list[ToolAnswer]] = Field(default_factory=dict)
    http: list[HttpAnswer] = Field(default_factory=list)
    approvals: dict[str, list[Decision]] = Field(default_factory=dict)
    files: dict[str, str] = Field(default_factory=dict)
    expect: Expectations = Field(default_factory=Expectations)

    @field_validator("approvals", mode="before")
    @classmethod
    def _short_decisions(cls, value: Any) -> Any:
        """``approved`` for ``{decision: approved}``; one decision for a list of one."""
        if not isinstance(value, dict):
            return value
        out: dict[Any, Any] = {}
        for step, answers in value.items():
            items = answers if isinstance(answers, list) else [answers]
            out[step] = [{"decision": a} if isinstance(a, str) else a for a in items]
        return out

    @field_validator("tools", mode="before")
    @classmethod
    def _one_answer(cls, value: Any) -> Any:
        if not isinstance(value, dict):
            return value
        return {k: v if isinstance(v, list) else [v] for k, v in value.items()}


class TestsFile(_Strict):
    """A tests file: which definitions, which workflow, the cases."""

    __test__ = False

    definitions: list[str] = Field(default_factory=lambda: ["definitions.yaml"])
    workflow: str | None = None
    cases: list[TestCase] = Field(min_length=1)

    @field_validator("definitions", mode="before")
    @classmethod
    def _one_file(cls, value: Any) -> Any:
        return [value] if isinstance(value, str) else value


def parse_tests(data: Any, *, source: str) -> TestsFile:
    """Check a tests document and read it.

    Raises:
        WorkflowTestsError: every problem, each with its field path (``cases[1].expect.status``),
            and for a case the case's name.
    """
    try:
        return TestsFile.model_validate(data)
    except ValidationError as exc:
        problems = [_problem(error, data) for error in exc.errors()]
        raise WorkflowTestsError(f"tests file {source}", problems) from None


def _problem(error: Any, data: Any) -> Problem:
    path = ""
    for part in error["loc"]:
        path += f"[{part}]" if isinstance(part, int) else (f".{part}" if path else str(part))
    # Pydantic's union and tagged-choice locations name the choice tried ("function-after[...]");
    # the user wrote a field, not a validator.
    path = re.sub(r"\.function-[a-z]+\[[^\]]*\]", "", path)
    message = error["msg"].removeprefix("Value error, ")
    if error["type"] == "extra_forbidden":
        message = "unexpected field (a typo?)"
    name = _case_name(error["loc"], data)
    return Problem(path, message + (f" (case {name!r})" if name else ""))


def _case_name(loc: tuple[Any, ...], data: Any) -> str | None:
    if len(loc) >= 2 and loc[0] == "cases" and isinstance(loc[1], int) and isinstance(data, dict):
        cases = data.get("cases")
        if isinstance(cases, list) and loc[1] < len(cases) and isinstance(cases[loc[1]], dict):
            name = cases[loc[1]].get("name")
            return str(name) if name else None
    return None


# --------------------------------------------------------------------------------------------
# What a run did, and how it compares
# --------------------------------------------------------------------------------------------


@dataclass
class Observed:
    """What a case's run did."""

    status: str
    path: list[str]
    outputs: dict[str, Any]
    cost_usd: float
    approvals: int
    error: str | None = None
    notes: list[str] = field(default_factory=list)
    """What the scripted world noticed (an unmatched model call answered by default, ...)."""


@dataclass(frozen=True)
class Mismatch:
    """One expectation the run did not meet: what, expected, actual, and a diff when long."""

    what: str
    expected: Any
    actual: Any
    diff: str = ""

    def render(self) -> str:
        """The mismatch for a person: one line, or the expected/actual diff."""
        if self.diff:
            return f"{self.what}:\n{self.diff}"
        return f"{self.what}: expected {_show(self.expected)}, got {_show(self.actual)}"


def _show(value: Any) -> str:
    return json.dumps(value, default=str, ensure_ascii=False)


def _diff(expected: Any, actual: Any) -> str:
    """A unified diff of two values' pretty JSON (``-`` expected, ``+`` actual)."""
    left = json.dumps(expected, indent=2, sort_keys=True, default=str).splitlines()
    right = json.dumps(actual, indent=2, sort_keys=True, default=str).splitlines()
    lines = difflib.unified_diff(left, right, "expected", "actual", lineterm="", n=2)
    return "\n".join(f"    {line}" for line in lines)


def _long(*values: Any) -> bool:
    return any(len(_show(v)) > 60 for v in values)


def check_case(expect: Expectations, observed: Observed) -> list[Mismatch]:
    """Every expectation ``observed`` misses (empty: the case passes)."""
    found: list[Mismatch] = []
    if expect.status is not None and observed.status != expect.status:
        status = observed.status + (f" ({observed.error})" if observed.error else "")
        found.append(Mismatch("status", expect.status, status))
    if expect.path is not None and observed.path != expect.path:
        lines = difflib.unified_diff(expect.path, observed.path, "expected", "actual", lineterm="")
        found.append(
            Mismatch("path", expect.path, observed.path, "\n".join(f"    {x}" for x in lines))
        )
    for step in expect.visited:
        if step not in observed.path:
            found.append(Mismatch(f"visited {step}", "visited", "not visited"))
    for step in expect.not_visited:
        if step in observed.path:
            found.append(Mismatch(f"not_visited {step}", "not visited", "visited"))
    for path, wanted in expect.outputs.items():
        # One match is compared as a value, several (a wildcard) as the list of them.
        got = _json_path(path, observed.outputs)
        actual: Any = got[0] if len(got) == 1 else (got or "(nothing)")
        if not got or actual != wanted:
            diff = _diff(wanted, actual) if _long(wanted, actual) else ""
            found.append(Mismatch(f"outputs {path}", wanted, actual, diff))
    for expression in expect.that:
        verdict = _holds(expression, observed.outputs)
        if verdict is not True:
            found.append(Mismatch(f"that {expression}", True, verdict))
    if expect.error is not None and expect.error not in (observed.error or ""):
        found.append(Mismatch("error", f"containing {expect.error!r}", observed.error))
    if expect.max_cost_usd is not None and observed.cost_usd > expect.max_cost_usd:
        found.append(Mismatch("cost_usd", f"<= {expect.max_cost_usd}", observed.cost_usd))
    if expect.approvals is not None and observed.approvals != expect.approvals:
        found.append(Mismatch("approvals asked", expect.approvals, observed.approvals))
    return found


def _json_path(path: str, outputs: dict[str, Any]) -> list[Any]:
    # Imported here: only `langorch test` reads JSONPath (the `local` extra ships it).
    from jsonpath_ng.ext.parser import parse

    return [match.value for match in parse(path).find(outputs)]


def _holds(expression: str, outputs: dict[str, Any]) -> Any:
    """``True``, or what the expression gave instead (its error's message when it failed)."""
    from langorch.domain.templates import TemplateError, evaluate

    try:
        return evaluate(expression, dict(outputs))
    except TemplateError as exc:
        return f"error: {exc}"
