"""The gate every outward call passes: the tool policies of the run.

Three kinds of call pass it, under one rules language: a model-made tool call of an LLM step
(through :func:`tool_gate`), an ``http`` step's request (``tool == "http"``, ``args`` its
``method``, ``url``, ``host`` and ``body``) and a CKP node's call of an agent or an MCP tool
(``tool`` the action, ``args`` its parameters, secrets masked) — the last two through
:func:`check_call`.

The rules (:func:`langorch.domain.tool_policies.decide`) say ``allow``: the call goes ahead;
``deny``: it is refused (an LLM's model is told, an ``http`` step or a CKP call fails, and the
timeline records ``tool_call_denied``); ``require_approval``: the run parks on an approval
showing the exact call. Approved, the call is made once, recorded, so a replay or a restart
after it never sends it again; refused (or unanswered), it is refused as a denial is.
Matching ``shadow`` rules are recorded as ``tool_policy_shadow`` and change nothing.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from langorch.domain.tool_policies import ToolPolicy, decide, tool_request
from langorch.engine.context import EngineContext, ToolGate
from langorch.engine.kinds.base import StepSpec, step_event

ARGS_CHARS = 200
"""What the timeline shows of a gated call's arguments."""


def tool_gate(spec: StepSpec, ctx: EngineContext, emit: Any) -> ToolGate | None:
    """The gate of one attempt of ``spec`` (``None``: the workflow has no tool policies)."""
    if not ctx.tool_policies:
        return None

    async def gate(tool: str, args: dict[str, Any]) -> str | None:
        refused = check_call(spec, ctx, emit, tool, args, asker="The model")
        if refused is None:
            return None
        return f"error: {refused}; do not call it again, answer without it"

    return gate


def check_call(
    spec: StepSpec,
    ctx: EngineContext,
    emit: Any,
    tool: str,
    args: dict[str, Any],
    *,
    asker: str = "The step",
) -> str | None:
    """Pass one call of ``spec`` through the run's tool policies.

    Args:
        spec: The step making the call.
        ctx: The run's context (its ``tool_policies`` and default approvers).
        emit: Where the step's timeline events go.
        tool: The call's name as the rules see it.
        args: Its arguments as the rules and the approver see them (secrets masked).
        asker: Who asks to make the call, as the approver reads it.

    Returns:
        ``None``: the call may go ahead; else why it may not ("the call to X was refused …":
        an LLM's model is told this, a step that makes the call itself fails with it).
    """
    policies = ctx.tool_policies
    if not policies:
        return None
    verdict = decide(policies, tool, args)
    shown = _shown(args)
    if verdict.action == "require_approval" and verdict.rule is not None:
        # Asked first: the step runs again from its start once answered, and its shadow
        # records are made then, once.
        told = _ask(spec, ctx, emit, tool, args, policies[verdict.rule], verdict.rule, asker)
        _shadows(spec, emit, tool, shown, verdict.shadows)
        return told
    _shadows(spec, emit, tool, shown, verdict.shadows)
    if verdict.action == "allow" or verdict.rule is None:
        return None
    emit(
        step_event(
            "tool_call_denied", spec, tool=tool, args=shown, rule=verdict.rule, outcome="denied"
        )
    )
    denied = "is not allowed by this workflow's tool policies"
    return _told(tool, policies[verdict.rule], denied)


def _shadows(
    spec: StepSpec, emit: Any, tool: str, shown: str, shadows: Sequence[tuple[int, str]]
) -> None:
    """Record what each matching shadow rule would have done."""
    for index, action in shadows:
        emit(
            step_event(
                "tool_policy_shadow", spec, tool=tool, args=shown, rule=index, outcome=action
            )
        )


def _ask(
    spec: StepSpec,
    ctx: EngineContext,
    emit: Any,
    tool: str,
    args: dict[str, Any],
    policy: ToolPolicy,
    rule: int,
    asker: str,
) -> str | None:
    """Park for a person; ``None`` once they approved, else why the call is refused."""
    from langgraph.types import interrupt

    request = tool_request(
        step_id=spec.step_id,
        tool=tool,
        args=args,
        policy=policy,
        rule=rule,
        approvers=list(policy.approvers or ctx.default_approvers),
        asker=asker,
    )
    answer = interrupt(request)
    decision = answer if isinstance(answer, dict) else {"decision": str(answer)}
    if decision.get("decision") == "approved":
        return None
    emit(
        step_event(
            "tool_call_denied",
            spec,
            tool=tool,
            args=_shown(args),
            rule=rule,
            outcome=str(decision.get("decision")),
            decided_by=decision.get("approver"),
        )
    )
    comment = f' ("{decision["comment"]}")' if decision.get("comment") else ""
    return _told(tool, policy, f"was refused by the person asked to approve it{comment}")


def _told(tool: str, policy: ToolPolicy, what: str) -> str:
    reason = f" ({policy.reason})" if policy.reason else ""
    return f"the call to {tool} {what}{reason}"


def _shown(args: dict[str, Any]) -> str:
    text = json.dumps(args, sort_keys=True, default=str)
    return text if len(text) <= ARGS_CHARS else text[: ARGS_CHARS - 1] + "…"
