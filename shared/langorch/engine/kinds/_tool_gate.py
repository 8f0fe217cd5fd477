"""The gate every outward call passes: the tool policies of the run.

Three kinds of call pass it, under one rules language: a model-made tool call of an LLM step
(through :func:`tool_gate`), an ``http`` step's request (``tool == "http"``, ``args`` its
``method``, ``url``, ``host`` and ``body``) and a CKP node's call of an agent or an MCP tool
(``tool`` the action, ``args`` its parameters, secrets masked) — the last two through
:func:`check_call`.

The rules are the deployment's, the called tool server's and the workflow's, the strictest
verdict winning (:func:`langorch.domain.tool_policies.rule_on`). They say ``allow``: the call
goes ahead; ``deny``: it is refused (an LLM's model is told, an ``http`` step or a CKP call
fails, and the timeline records ``tool_call_denied``); ``require_approval``: the run parks on an
approval showing the exact call. Approved, the call is made once, recorded, so a replay or a restart
after it never sends it again; refused (or unanswered), it is refused as a denial is.
Matching ``shadow`` rules are recorded as ``tool_policy_shadow`` and change nothing.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from langorch.domain.tool_policies import WORKFLOW, ToolPolicy, rule_label, rule_on, tool_request
from langorch.engine.context import EngineContext, ToolGate
from langorch.engine.kinds.base import StepSpec, step_event

ARGS_CHARS = 200
"""What the timeline shows of a gated call's arguments."""


def tool_gate(spec: StepSpec, ctx: EngineContext, emit: Any) -> ToolGate:
    """The gate of one attempt of ``spec``'s model-made tool calls."""

    async def gate(
        tool: str, args: dict[str, Any], server: str | None, rules: Sequence[ToolPolicy]
    ) -> str | None:
        refused = check_call(
            spec, ctx, emit, tool, args, asker="The model", server=server, server_rules=rules
        )
        if refused is None:
            return None
        return f"error: {refused}; do not call it again, answer without it"

    return gate


def gated(ctx: EngineContext) -> bool:
    """Whether the run has rules of its own (the deployment's or the workflow's); a tool
    server's are known only at its call."""
    return bool(ctx.tool_policies or ctx.deployment_tool_policies)


def check_call(
    spec: StepSpec,
    ctx: EngineContext,
    emit: Any,
    tool: str,
    args: dict[str, Any],
    *,
    asker: str = "The step",
    server: str | None = None,
    server_rules: Sequence[ToolPolicy] = (),
) -> str | None:
    """Pass one call of ``spec`` through the rules of every place.

    Args:
        spec: The step making the call.
        ctx: The run's context (the deployment's and the workflow's rules, default approvers).
        emit: Where the step's timeline events go.
        tool: The call's name as the rules see it.
        args: Its arguments as the rules and the approver see them (secrets masked).
        asker: Who asks to make the call, as the approver reads it.
        server: The registered tool server the call goes to (``None``: none).
        server_rules: That server's own rules.

    Returns:
        ``None``: the call may go ahead; else why it may not ("the call to X was refused …":
        an LLM's model is told this, a step that makes the call itself fails with it).
    """
    places: list[tuple[str, Sequence[ToolPolicy]]] = [
        ("deployment", ctx.deployment_tool_policies),
        (f"tool server {server}", server_rules),
        (WORKFLOW, ctx.tool_policies),
    ]
    places = [(where, rules) for where, rules in places if rules]
    if not places:
        return None
    ruling = rule_on(places, tool, args)
    shown = _shown(args)
    policy, rule = ruling.policy, ruling.rule
    if ruling.action == "require_approval" and policy is not None:
        # Asked first: the step runs again from its start once answered, and its shadow
        # records are made then, once.
        told = _ask(spec, ctx, emit, (tool, args), policy, (ruling.where, rule), asker)
        _shadows(spec, emit, tool, shown, ruling.shadows)
        return told
    _shadows(spec, emit, tool, shown, ruling.shadows)
    if ruling.action == "allow" or policy is None:
        return None
    emit(_event("tool_call_denied", spec, tool, shown, ruling.where, rule, outcome="denied"))
    whose = "this workflow's" if ruling.where == WORKFLOW else f"the {ruling.where}'s"
    return _told(tool, policy, f"is not allowed by {whose} tool policies")


def _event(
    name: str, spec: StepSpec, tool: str, shown: str, where: str, rule: Any, **fields: Any
) -> dict[str, Any]:
    """A gate's timeline event: ``rule`` its index in its place's list, ``policy_of`` the place
    when it is not the workflow."""
    place = None if where == WORKFLOW else where
    return step_event(name, spec, tool=tool, args=shown, rule=rule, policy_of=place, **fields)


def _shadows(
    spec: StepSpec, emit: Any, tool: str, shown: str, shadows: Sequence[tuple[str, int, str]]
) -> None:
    """Record what each matching shadow rule would have done."""
    for where, index, action in shadows:
        emit(_event("tool_policy_shadow", spec, tool, shown, where, index, outcome=action))


def _ask(
    spec: StepSpec,
    ctx: EngineContext,
    emit: Any,
    call: tuple[str, dict[str, Any]],
    policy: ToolPolicy,
    rule: tuple[str, int | None],
    asker: str,
) -> str | None:
    """Park for a person; ``None`` once they approved, else why the call is refused.
    ``call``: the tool and its arguments; ``rule``: the deciding rule's place and index."""
    from langgraph.types import interrupt

    tool, args = call
    where, index = rule
    request = tool_request(
        step_id=spec.step_id,
        tool=tool,
        args=args,
        policy=policy,
        label=rule_label(where, index),
        approvers=list(policy.approvers or ctx.default_approvers),
        asker=asker,
    )
    answer = interrupt(request)
    decision = answer if isinstance(answer, dict) else {"decision": str(answer)}
    if decision.get("decision") == "approved":
        return None
    emit(
        _event(
            "tool_call_denied",
            spec,
            tool,
            _shown(args),
            where,
            index,
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
