"""Tool-call policies: rules over a tool call's name and arguments, as data on a workflow.

::

    tool_policies:
      - when: 'tool == "issue_refund" and args.amount > 500'
        action: require_approval          # allow | deny | require_approval
        approvers: [finance@example.com]
        reason: refunds over $500 need finance
      - {when: 'tool == "delete_account"', action: deny}
      - {when: 'tool == "issue_refund"', action: deny, mode: shadow}   # only recorded

Rules come from three places, each a list as above: the deployment (a file named by
``LANGORCH_TOOL_POLICIES_FILE``), a tool server's registration (``langorch tools add …
--policies FILE``: rules over calls of that server's tools only) and the workflow. Each place
decides by its own first matching ``enforce`` rule; the **strictest** of their verdicts wins
(``deny`` over ``require_approval`` over ``allow``; among equals, the deployment's, then the
server's, then the workflow's). So no place can loosen another's rule: a workflow's ``allow``
does not lift the deployment's ``deny``, and a workflow may hold for approval a call its server
allows. :func:`rule_on` applies this; :func:`decide` is one place's verdict.

``when`` is an expression of the sandboxed language (:func:`langorch.domain.templates.evaluate`)
over ``tool`` (the name the model called) and ``args`` (its arguments). The first ``enforce``
rule that matches decides; none matching allows the call. Every matching ``shadow`` rule is only
recorded (what it would have done). A rule whose expression fails on a call (``args.amount`` of
a call without one) does not match it.

Pure: the engine's gate (:mod:`langorch.engine.kinds._tool_gate`) applies the verdict.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from langorch.domain.errors import DefinitionError, Problem, StepFailedError
from langorch.domain.identities import identity_problems
from langorch.domain.templates import TemplateError, check_expression, evaluate

ToolAction = Literal["allow", "deny", "require_approval"]

TOOL_STEP_SUFFIX = ":tool"
"""A tool-call approval's ``step_id`` is the LLM step's id plus this (it is no step of the
plan)."""


class ToolCallRefusedError(StepFailedError):
    """A step's own call (an ``http`` request, a CKP agent or tool call) was refused by a tool
    policy or by the person asked to approve it; another attempt would be refused again."""


def parse_policies(data: Any, source: str, field: str = "tool_policies") -> list[ToolPolicy]:
    """Rules read from a file or an option (a list, or ``{tool_policies: [...]}``), checked as
    a workflow's are, with no workflow approvers to fall back on.

    Raises:
        DefinitionError: not a list of rules, or a rule is wrong (every problem, with its path).
    """
    from pydantic import ValidationError

    if isinstance(data, dict) and set(data) == {"tool_policies"}:
        data = data["tool_policies"]
    if not isinstance(data, list):
        raise DefinitionError(
            source, [Problem(field, "is not a list of rules", "write a YAML or JSON list")]
        )
    rules: list[ToolPolicy] = []
    problems: list[Problem] = []
    for index, item in enumerate(data):
        try:
            rules.append(ToolPolicy.model_validate(item))
        except ValidationError as exc:
            problems += [
                Problem(
                    ".".join([f"{field}[{index}]", *(str(p) for p in e["loc"])]),
                    e["msg"],
                    "fields: when, action (allow|deny|require_approval), mode, approvers, "
                    "reason, timeout_seconds",
                )
                for e in exc.errors()
            ]
    problems += policy_problems(rules, [], field) if not problems else []
    if problems:
        raise DefinitionError(source, problems)
    return rules


class ToolPolicy(BaseModel):
    """One rule of a workflow's ``tool_policies``."""

    model_config = ConfigDict(extra="forbid")

    when: str = Field(min_length=1)
    """Which calls the rule is about: an expression over ``tool`` and ``args``."""
    action: ToolAction
    mode: Literal["enforce", "shadow"] = "enforce"
    """``shadow``: record what the rule would have done, change nothing."""
    approvers: list[str] = Field(default_factory=list)
    """Who decides a ``require_approval`` call (default: the workflow's ``approvers``)."""
    reason: str = ""
    """Why, as the model (a denial) and the approver read it."""
    timeout_seconds: int = Field(default=86_400, ge=60, le=31_536_000)
    """How long a ``require_approval`` question waits; unanswered, the call is refused."""


@dataclass(frozen=True)
class Verdict:
    """What the rules say of one call.

    Attributes:
        action: ``allow``, ``deny`` or ``require_approval``.
        rule: The index of the deciding ``enforce`` rule (``None``: no rule matched).
        shadows: ``(index, action)`` of each matching ``shadow`` rule.
    """

    action: ToolAction
    rule: int | None = None
    shadows: list[tuple[int, ToolAction]] = field(default_factory=list)


def decide(policies: Sequence[ToolPolicy], tool: str, args: Mapping[str, Any]) -> Verdict:
    """The verdict of ``policies`` on a call of ``tool`` with ``args``."""
    scope = {"tool": tool, "args": dict(args)}
    shadows: list[tuple[int, ToolAction]] = []
    decided: tuple[int, ToolAction] | None = None
    for index, policy in enumerate(policies):
        if policy.mode == "enforce" and decided is not None:
            continue
        if not _matches(policy, scope, index):
            continue
        if policy.mode == "shadow":
            shadows.append((index, policy.action))
        else:
            decided = (index, policy.action)
    if decided is None:
        return Verdict("allow", None, shadows)
    return Verdict(decided[1], decided[0], shadows)


STRICTNESS: dict[str, int] = {"allow": 0, "require_approval": 1, "deny": 2}
"""Which verdict wins across places: the higher."""

WORKFLOW = "workflow"
"""The place of a workflow's own ``tool_policies``."""


@dataclass(frozen=True)
class Ruling:
    """What the rules of every place say of one call.

    Attributes:
        action: ``allow``, ``deny`` or ``require_approval``.
        where: The deciding place (``deployment``, ``tool server NAME``, ``workflow``).
        rule: The index of the deciding rule in its place's list (``None``: none matched).
        policy: The deciding rule.
        shadows: ``(place, index, action)`` of each matching ``shadow`` rule.
    """

    action: ToolAction
    where: str = WORKFLOW
    rule: int | None = None
    policy: ToolPolicy | None = None
    shadows: list[tuple[str, int, ToolAction]] = field(default_factory=list)


def rule_on(
    places: Sequence[tuple[str, Sequence[ToolPolicy]]], tool: str, args: Mapping[str, Any]
) -> Ruling:
    """The ruling of every place's rules on a call, in precedence order (deployment, tool
    server, workflow): each place's first matching ``enforce`` rule, the strictest winning."""
    ruling = Ruling("allow")
    shadows: list[tuple[str, int, ToolAction]] = []
    for where, policies in places:
        verdict = decide(policies, tool, args)
        shadows += [(where, index, action) for index, action in verdict.shadows]
        if verdict.rule is not None and STRICTNESS[verdict.action] > STRICTNESS[ruling.action]:
            ruling = Ruling(verdict.action, where, verdict.rule, policies[verdict.rule])
    return Ruling(ruling.action, ruling.where, ruling.rule, ruling.policy, shadows)


def rule_label(where: str, rule: object) -> str:
    """How the timeline names a rule: ``tool_policies[1]``, ``deployment tool_policies[0]``,
    ``tool server desk policies[0]``."""
    if where == WORKFLOW:
        return f"tool_policies[{rule}]"
    if where.startswith("tool server"):
        return f"{where} policies[{rule}]"
    return f"{where} tool_policies[{rule}]"


def _matches(policy: ToolPolicy, scope: dict[str, Any], index: int) -> bool:
    try:
        return bool(evaluate(policy.when, scope))
    except TemplateError as exc:
        import logging  # here: validation, which imports this module, never logs (issue 26)

        logging.getLogger(__name__).info(
            "tool policy does not apply to this call",
            extra={"rule": index, "reason": str(exc)[:200]},
        )
        return False


def policy_problems(
    policies: Sequence[ToolPolicy] | None, plan_approvers: list[str], field: str = "tool_policies"
) -> Iterator[Problem]:
    """What is wrong with a list of rules (paths from ``field``: a workflow's
    ``tool_policies``, a registration's ``policies``)."""
    for index, policy in enumerate(policies or ()):
        path = f"{field}[{index}]"
        error = check_expression(policy.when)
        if error is not None:
            yield Problem(
                f"{path}.when",
                f"not an expression: {error}",
                'write it over tool and args, e.g. tool == "issue_refund" and args.amount > 500',
            )
        yield from identity_problems(policy.approvers, f"{path}.approvers")
        if policy.action == "require_approval" and not (policy.approvers or plan_approvers):
            yield Problem(
                f"{path}.approvers",
                "a rule that requires approval needs someone to ask",
                "list the rule's approvers"
                + (" (or the workflow's approvers)" if field == "tool_policies" else ""),
            )


def tool_request(
    *,
    step_id: str,
    tool: str,
    args: Mapping[str, Any],
    policy: ToolPolicy,
    label: str,
    approvers: list[str],
    asker: str = "The model",
) -> dict[str, Any]:
    """The approval request of a call a rule holds, shaped as an ``approval`` step's (links,
    policies, reminders and the console handle it as any other): the exact call is shown.
    ``label``: the rule's name (:func:`rule_label`)."""
    reason = policy.reason or f"{label}: {policy.when}"
    return {
        "kind": "approval",
        "step_id": step_id + TOOL_STEP_SUFFIX,
        "title": f"Tool call: may {step_id} call {tool}?",
        "message": f"{asker} asks to call {tool}. {reason}",
        "context": {"tool": tool, "arguments": dict(args), "rule": policy.when},
        "editable": {},
        "approvers": approvers,
        "timeout_seconds": policy.timeout_seconds,
        "on_timeout": "reject",
        "require_code": False,
        "iteration": 1,
        "max_iterations": None,
        "tool_call": True,
    }
