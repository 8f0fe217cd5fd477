"""Tool-call policies: rules over a tool call's name and arguments, as data on a workflow.

::

    tool_policies:
      - when: 'tool == "issue_refund" and args.amount > 500'
        action: require_approval          # allow | deny | require_approval
        approvers: [finance@example.com]
        reason: refunds over $500 need finance
      - {when: 'tool == "delete_account"', action: deny}
      - {when: 'tool == "issue_refund"', action: deny, mode: shadow}   # only recorded

``when`` is an expression of the sandboxed language (:func:`langorch.domain.templates.evaluate`)
over ``tool`` (the name the model called) and ``args`` (its arguments). The first ``enforce``
rule that matches decides; none matching allows the call. Every matching ``shadow`` rule is only
recorded (what it would have done). A rule whose expression fails on a call (``args.amount`` of
a call without one) does not match it.

Pure: the engine's gate (:mod:`langorch.engine.kinds._tool_gate`) applies the verdict.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from langorch.domain.errors import Problem, StepFailedError
from langorch.domain.identities import identity_problems
from langorch.domain.templates import TemplateError, check_expression, evaluate

logger = logging.getLogger(__name__)

ToolAction = Literal["allow", "deny", "require_approval"]

TOOL_STEP_SUFFIX = ":tool"
"""A tool-call approval's ``step_id`` is the LLM step's id plus this (it is no step of the
plan)."""


class ToolCallRefusedError(StepFailedError):
    """A step's own call (an ``http`` request, a CKP agent or tool call) was refused by a tool
    policy or by the person asked to approve it; another attempt would be refused again."""


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


def _matches(policy: ToolPolicy, scope: dict[str, Any], index: int) -> bool:
    try:
        return bool(evaluate(policy.when, scope))
    except TemplateError as exc:
        logger.info(
            "tool policy does not apply to this call",
            extra={"rule": index, "reason": str(exc)[:200]},
        )
        return False


def policy_problems(
    policies: Sequence[ToolPolicy] | None, plan_approvers: list[str]
) -> Iterator[Problem]:
    """What is wrong with a workflow's ``tool_policies`` (paths from the workflow)."""
    for index, policy in enumerate(policies or ()):
        path = f"tool_policies[{index}]"
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
                "list the rule's approvers (or the workflow's approvers)",
            )


def tool_request(
    *,
    step_id: str,
    tool: str,
    args: Mapping[str, Any],
    policy: ToolPolicy,
    rule: int,
    approvers: list[str],
    asker: str = "The model",
) -> dict[str, Any]:
    """The approval request of a call a rule holds, shaped as an ``approval`` step's (links,
    policies, reminders and the console handle it as any other): the exact call is shown."""
    reason = policy.reason or f"tool_policies[{rule}]: {policy.when}"
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
