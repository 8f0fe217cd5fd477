"""Validation of blocks and workflows before anything is stored or runs (001 §4.1).

Every problem is reported at once, each with its path in the definition (``steps[3].branches.yes``)
and a hint; validation never stops at the first problem. A definition that fails validation is
never stored and never compiled.

The checks come from three places: the plan's topology (:mod:`langorch.domain.plan.topology`:
references, reachability, cycles, branches, joins), each step's kind (its own checks, what it
reads and writes: :mod:`langorch.domain.kinds`), and the plan-level checks here (data flow:
every key a step reads is provided before it; triggers and schedules; tools and providers).
The runner needs only the topology (:func:`step_graph`), so it never imports this module.

A finding is an **error** (the definition is refused) or a **warning** (it is stored and runs;
``--strict`` refuses it too). Two findings are warnings because seed 000 gives them a meaning at
run time: an input that neither the inputs schema nor an earlier step provides is read from
``shared_context``, else the user's stored preference of that name, else empty; and a tool no
registry binds yet (``browser``) fails a step only if its model calls it.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from langorch.domain.approvals.policy import policy_problems
from langorch.domain.budgets import budget_problems
from langorch.domain.definitions import (
    ASK,
    BlockDefinition,
    PlanStep,
    ScheduleSpec,
    TaskPlan,
    Trigger,
)
from langorch.domain.errors import DefinitionError, Problem
from langorch.domain.event_patterns import pattern_problems
from langorch.domain.flow_control import unenforced
from langorch.domain.hooks import hook_outputs, hook_problems, hook_templates, hook_tools
from langorch.domain.identities import identity_problems
from langorch.domain.kinds import registry
from langorch.domain.kinds.base import (
    How,
    Read,
    StepCheck,
    StepKind,
    is_key_path,
    reads_of,
    root_key,
    template_names,
)
from langorch.domain.lookup import DefinitionLookup, InMemoryLookup
from langorch.domain.plan.graph import Edge, EdgeKind, Join, LoopInfo, StepGraph, StepNode, reach
from langorch.domain.plan.topology import Topology, step_graph
from langorch.domain.prices import key_problem
from langorch.domain.resources import check_step_resource
from langorch.domain.step_settings import APPROVAL_LABELS, AskSpec, InputMapping, mapping_source
from langorch.domain.templates import TemplateError, check, check_expression
from langorch.domain.tool_policies import policy_problems as tool_policy_problems

__all__ = [
    "APPROVAL_LABELS",
    "BUILTIN_KEYS",
    "S3_INPUT_KEYS",
    "DefinitionLookup",
    "Edge",
    "EdgeKind",
    "InMemoryLookup",
    "Join",
    "LoopInfo",
    "StepGraph",
    "StepNode",
    "Validation",
    "check_block",
    "check_workflow",
    "ensure_valid_block",
    "ensure_valid_workflow",
    "step_graph",
    "validate_block",
    "validate_workflow",
    "workflow_advice",
]

BUILTIN_KEYS = frozenset({"run_id", "error", "user_id", "user_preferences", "user_history"})
"""Names every step can read without any step or input providing them."""

S3_INPUT_KEYS = frozenset({"bucket", "key", "size", "etag", "version_id"})
"""What a run started by an ``s3`` trigger has in its input (the object that was dropped)."""

_GENERIC_SETTINGS = "settings"
"""The field that holds the settings of kinds registered outside the built-ins."""


# --------------------------------------------------------------------------------------------
# Public functions
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Validation:
    """What validating a definition found, errors and warnings apart.

    Attributes:
        errors: Problems that refuse the definition.
        warnings: Findings that do not (an input resolved at run time, an unbound tool).
    """

    errors: list[Problem] = field(default_factory=list)
    warnings: list[Problem] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """Whether the definition may be stored (no errors; warnings allowed)."""
        return not self.errors

    def strict(self) -> Validation:
        """The same findings with every warning counted as an error (``--strict``)."""
        return Validation(errors=[*self.errors, *self.warnings])


def check_block(
    block: BlockDefinition, *, tools: frozenset[str] | None, providers: frozenset[str] | None
) -> Validation:
    """Every error and warning of a block on its own.

    Args:
        block: The block.
        tools: Names of the tools bound in this deployment (built-in and registered); a
            ``tools_required`` entry outside them is a warning. ``None`` skips the check.
        providers: Names of the available LLM providers; ``None`` skips the check.

    Returns:
        The findings, paths relative to the block.
    """
    warnings = [
        _unbound_tool(f"tools_required[{j}]", tool, tools)
        for j, tool in enumerate(block.tools_required)
        if tools is not None and tool not in tools
    ]
    return Validation(errors=_block_errors(block, providers), warnings=warnings)


def validate_block(
    block: BlockDefinition, *, tools: frozenset[str] | None, providers: frozenset[str] | None
) -> list[Problem]:
    """The errors of a block on its own (:func:`check_block` has its warnings too).

    Args:
        block: The block.
        tools: Names of the bound tools (unbound ones are only warnings).
        providers: Names of the available LLM providers.

    Returns:
        The problems (empty when the block is valid), paths relative to the block.
    """
    return check_block(block, tools=tools, providers=providers).errors


def _block_errors(block: BlockDefinition, providers: frozenset[str] | None) -> list[Problem]:
    problems: list[Problem] = []
    add = problems.append
    if providers is not None and block.llm_provider and block.llm_provider not in providers:
        add(_unknown_provider("llm_provider", block.llm_provider, providers))
    kind = registry.get(block.block_type)
    if kind is None:
        add(
            Problem(
                "block_type",
                f"unknown kind {block.block_type.value!r}",
                registry.unknown_kind_hint(block.block_type.value),
            )
        )
    for name in _ignored(block, kind, "block_fields"):
        add(_ignored_setting(name, block.block_type.value))
    for key in block.output_types:
        if key not in block.output_keys:
            add(
                Problem(
                    f"output_types.{key}",
                    f"{key!r} is not one of the output_keys",
                    "add it to output_keys or remove its type",
                )
            )
    if kind is not None:
        problems.extend(kind.check_block(block))
    # Templates of a block read the step's inputs: the block's input keys and the built-ins.
    readable = frozenset(block.input_keys) | BUILTIN_KEYS
    templates = [
        ("prompt_template", block.prompt_template, "template"),
        ("system_prompt", block.system_prompt or "", "template"),
        *(kind.block_templates(block) if kind is not None else ()),
    ]
    for path, template, how in templates:
        problems.extend(_template_reads(path, template, readable, how))  # type: ignore[arg-type]
    return problems


def ensure_valid_block(
    block: BlockDefinition, *, tools: frozenset[str] | None, providers: frozenset[str] | None
) -> None:
    """Raise when a block has problems.

    Raises:
        DefinitionError: ``block <id>`` with every problem.
    """
    problems = validate_block(block, tools=tools, providers=providers)
    if problems:
        raise DefinitionError(f"block {block.block_id}", problems)


def check_workflow(
    plan: TaskPlan,
    lookup: DefinitionLookup,
    *,
    tools: frozenset[str] | None,
    providers: frozenset[str] | None,
) -> Validation:
    """Every error and warning of a workflow, with the blocks and workflows it refers to.

    Args:
        plan: The workflow.
        lookup: Where referenced blocks and subflow workflows are found.
        tools: Names of the tools bound in this deployment (built-in and registered); a block
            needing another is a warning. ``None`` skips the check.
        providers: Names of the available LLM providers; ``None`` skips the check.

    Returns:
        The findings, paths relative to the workflow. Inputs nothing provides and unbound
        tools are warnings; :func:`workflow_advice` is not included.
    """
    topology = Topology(plan, lookup)
    return Validation(
        errors=[
            *topology.problems,
            *_kind_problems(topology),
            *_plan_problems(plan),
            *_provider_problems(topology, providers),
            *_editable_problems(topology),
            *_ask_problems(topology),
        ],
        warnings=[
            *_input_problems(topology),
            *_mapping_problems(topology),
            *_while_problems(topology),
            *_remember_problems(topology),
            *_tool_warnings(topology, tools),
            *_ask_warnings(topology),
            *unenforced(plan, list(plan.triggers)),
        ],
    )


def validate_workflow(
    plan: TaskPlan,
    lookup: DefinitionLookup,
    *,
    tools: frozenset[str] | None,
    providers: frozenset[str] | None,
) -> list[Problem]:
    """The errors of a workflow (:func:`check_workflow` has its warnings too).

    Args:
        plan: The workflow.
        lookup: Where referenced blocks and subflow workflows are found.
        tools: Names of the bound tools (unbound ones are only warnings).
        providers: Names of the available LLM providers.

    Returns:
        The problems (empty when the workflow is valid), paths relative to the workflow.
    """
    return check_workflow(plan, lookup, tools=tools, providers=providers).errors


def workflow_advice(plan: TaskPlan) -> list[Problem]:
    """What is valid in a workflow but probably not meant, e.g. a review loop with no route
    for its last rejection. Never a reason to refuse the workflow.

    Args:
        plan: The workflow (valid or not; steps whose kind is unknown are skipped).

    Returns:
        The advice, paths relative to the workflow.
    """
    advice: list[Problem] = []
    for i, step in enumerate(plan.steps):
        kind = registry.get(step.kind) if step.kind is not None else None
        if kind is not None:
            advice.extend(kind.advice(step, f"steps[{i}]"))
        if step.max_iterations is not None and step.on_max_iterations is None:
            advice.append(
                Problem(
                    f"steps[{i}].max_iterations",
                    f"when the run comes back to {step.step_id!r} after {step.max_iterations} "
                    "runs, the step fails with LoopLimitReachedError (its on_error or the "
                    "workflow's on_failure may catch it; else the run fails)",
                    "declare on_max_iterations (the step to go to then) to route it",
                )
            )
    return advice


def ensure_valid_workflow(
    plan: TaskPlan,
    lookup: DefinitionLookup,
    *,
    tools: frozenset[str] | None,
    providers: frozenset[str] | None,
) -> None:
    """Raise when a workflow has problems.

    Raises:
        DefinitionError: ``workflow <plan_id>`` with every problem.
    """
    problems = validate_workflow(plan, lookup, tools=tools, providers=providers)
    if problems:
        raise DefinitionError(f"workflow {plan.plan_id}", problems)


# --------------------------------------------------------------------------------------------
# Kinds
# --------------------------------------------------------------------------------------------


def _ignored(
    definition: PlanStep | BlockDefinition, kind: StepKind | None, attr: registry.FieldsOf
) -> list[str]:
    """Kind-specific fields set on a definition whose kind does not use them."""
    if kind is None:
        return []
    owned = {_GENERIC_SETTINGS, *registry.owned_fields(attr)}
    own = getattr(kind, attr) | ({_GENERIC_SETTINGS} if kind.settings_model else set())
    return [
        name
        for name in type(definition).model_fields
        if name in owned and name not in own and getattr(definition, name) is not None
    ]


def _kind_problems(t: Topology) -> Iterator[Problem]:
    """Settings of other kinds, each kind's own checks, input mappings, template syntax."""
    for step in t.steps():
        sid = step.step_id
        kind, block, path = t.specs[sid], t.blocks[sid], t.sp(sid)
        if kind is None:
            continue
        for name in _ignored(step, kind, "step_fields"):
            yield _ignored_setting(f"{path}.{name}", kind.name)
        yield from check_step_resource(step.resource, kind.name, kind.parks, path)
        yield from kind.check_step(StepCheck(step, block, path, t.branches[sid], t.plan, t.lookup))
        for key, mapping in (step.input_mappings or {}).items():
            if block is not None and key not in block.input_keys:
                yield Problem(
                    f"{path}.input_mappings.{key}",
                    f"{key!r} is not an input key of block {block.block_id!r}",
                    f"map one of {', '.join(block.input_keys) or '(none)'}",
                )
            if _required_with_default(mapping):
                yield Problem(
                    f"{path}.input_mappings.{key}.default",
                    "a required input never takes its default: the step fails instead",
                    "remove default, or required",
                )
        yield from hook_problems(step.hooks, path)
        templates = [*kind.step_templates(step, block, path), *hook_templates(step.hooks, path)]
        for field_path, text, how in templates:
            error = check(text) if how == "template" else check_expression(text)
            if error is not None:
                yield _syntax_problem(field_path, how, error)


def _required_with_default(mapping: str | InputMapping) -> bool:
    if isinstance(mapping, str):
        return False
    return mapping.required and "default" in mapping.model_fields_set


def _template_reads(path: str, text: str, readable: frozenset[str], how: How) -> list[Problem]:
    """Syntax errors, else names a block template reads that are not among its inputs."""
    error = check(text) if how == "template" else check_expression(text)
    if error is not None:
        return [_syntax_problem(path, how, error)]
    return [
        Problem(
            path,
            f"reads {name!r}, which is not one of the block's input_keys",
            f"add {name!r} to input_keys, or fix the name",
        )
        for name in sorted(template_names(text, how) - readable)
    ]


# --------------------------------------------------------------------------------------------
# Data flow
# --------------------------------------------------------------------------------------------


def _input_problems(t: Topology) -> Iterator[Problem]:
    """Warnings for the keys a step reads that nothing provides before it (001 §4.1).

    Seed 000 reads such a key from ``shared_context``, else the user's stored preference of that
    name, else empty (``engine.kinds.base.scope_of``): a warning, since a preference may well
    hold it, but a typo looks the same.
    """
    plan = t.plan
    declare = (
        "declare it in inputs_schema.properties"
        if plan.inputs_schema is not None
        else "declare it in inputs_schema (the workflow has none)"
    )
    hint = (
        f"{declare}, produce it in an earlier step, or read it from another key with input_mappings"
        if plan.inputs_schema is not None
        else f"{declare}, or produce it in an earlier step"
    )
    for step in t.steps():
        available = _available(t, step)
        if available is None:
            continue
        mapped = set(step.input_mappings or {})
        for path, key, what in _reads(t, step):
            through_mapping = ".input_mappings." in path
            if key in available or (key in mapped and not through_mapping):
                continue
            fix = declare + ", produce it in an earlier step, or fix the mapping's path"
            if not through_mapping:
                fix = hint
            yield Problem(
                path,
                f"{what} {key!r}, which no input or earlier step provides",
                f"at run time it is read from shared_context (an undeclared run input "
                f"counts), else the user's preference {key!r}, else empty; to be sure of "
                f"it, {fix}",
            )


def _run_inputs(plan: TaskPlan) -> set[str]:
    """What every step can read before any step ran: the built-ins and the run's inputs."""
    base: set[str] = set(BUILTIN_KEYS)
    if plan.inputs_schema is not None:
        base |= set(plan.inputs_schema.properties)
    for trigger in plan.all_triggers():
        base |= set(trigger.input)
        if trigger.type == "s3":
            base |= S3_INPUT_KEYS
    return base


def _while_problems(t: Topology) -> Iterator[Problem]:
    """A ``while`` condition reading a key only the loop's body writes: at the first check it is
    empty, so the body never runs (the data-flow check counts the body, which runs before every
    later check)."""
    for step in t.steps():
        spec = step.loop
        sid = step.step_id
        if spec is None or spec.mode != "while" or sid not in t.loops:
            continue
        body = {s for s in t.index if _inside(t, s, sid)}
        entry = [e.source for e in t.inc[sid] if e.kind != "loop_back"]
        before = reach(entry, t.inc, None, backwards=True) - body - {sid}
        available = _run_inputs(t.plan) | before
        for earlier in before:
            available |= t.outputs[earlier]
        written = set().union(*(t.outputs[s] for s in body)) if body else set()
        try:
            names = template_names(spec.condition or "", "expression")
        except TemplateError:
            continue  # reported as a syntax problem
        for name in sorted((names & written) - available):
            yield Problem(
                f"{t.sp(sid)}.loop.while",
                f"the condition reads {name!r}, which only the loop's body writes: at the first "
                "check it is empty, so the body never runs",
                "use do_while (the body runs once before the check), or give it a value first "
                "(an input's default, or an earlier step)",
            )


def _inside(t: Topology, step_id: str, loop: str) -> bool:
    """Whether ``step_id`` is in ``loop``'s body, directly or in a nested loop's."""
    at = t.loop_of.get(step_id)
    while at is not None:
        if at == loop:
            return True
        at = t.loop_of.get(at)
    return False


def _mapping_problems(t: Topology) -> Iterator[Problem]:
    """Warnings for input mappings that resolve to nothing: a source that is not a key path,
    or a path past what ``inputs_schema`` declares (seed 004's nested ``input_map``)."""
    schema = t.plan.inputs_schema
    written = set().union(*t.outputs.values()) if t.outputs else set()
    for step in t.steps():
        for key, mapping in (step.input_mappings or {}).items():
            path = f"{t.sp(step.step_id)}.input_mappings.{key}"
            source = mapping_source(mapping)
            if not isinstance(mapping, str):
                path = f"{path}.path"
            if not is_key_path(source):
                yield Problem(
                    path,
                    f"{source!r} is not a key or a dotted path: the mapping resolves to nothing",
                    "write the key it reads, or a dotted path into it such as "
                    "request.user.name (a mapping is not rendered as a template)",
                )
            elif root_key(source) in written:
                continue  # what a step writes has no declared shape to check the path against
            elif schema is not None and root_key(source) in schema.properties:
                yield from _schema_miss(path, source, schema.properties)
            elif root_key(source) in t.outputs:
                yield from _result_miss(path, source, t.outputs[root_key(source)])


def _result_miss(path: str, source: str, outputs: frozenset[str]) -> Iterator[Problem]:
    """A problem when ``source`` reads a key a step's result does not have (``analyze.x``)."""
    parts = source.split(".")[1:]
    if parts[:1] == ["output"] and "output" not in outputs:
        parts = parts[1:]  # analyze.output.summary reads the key summary
    if parts and parts[0] not in outputs:
        known = ", ".join(sorted({*outputs, "output"}))
        yield Problem(
            path,
            f"{source!r} resolves to nothing: step {source.split('.')[0]!r} writes no {parts[0]!r}",
            f"read one of what it writes ({known}; output is all of them), or fix the path",
        )


def _schema_miss(path: str, source: str, properties: dict[str, Any]) -> Iterator[Problem]:
    """A problem when ``source`` goes past what the inputs schema declares of its root."""
    parts = source.split(".")
    node: Any = properties.get(parts[0])
    at = parts[0]
    for part in parts[1:]:
        if not isinstance(node, dict):
            return  # not declared in detail: nothing to say
        declared = node.get("properties")
        if node.get("type") in _SCALAR_TYPES:
            yield Problem(
                path,
                f"{source!r} resolves to nothing: inputs_schema declares {at} a "
                f"{node['type']}, which has no {part!r}",
                f"fix the path, or declare {at} an object with a property {part!r}",
            )
            return
        if not isinstance(declared, dict):
            return
        if part not in declared:
            closed = node.get("additionalProperties") is False
            unless = "" if closed else " unless the run's input brings it undeclared"
            yield Problem(
                path,
                f"{source!r} resolves to nothing{unless}: inputs_schema declares {at} "
                f"without {part!r}",
                f"fix the path ({at} declares {', '.join(sorted(declared)) or 'nothing'}), or "
                f"declare {part!r} in its properties",
            )
            return
        node = declared[part]
        at = f"{at}.{part}"


_SCALAR_TYPES = frozenset({"string", "number", "integer", "boolean", "null"})


def _remember_problems(t: Topology) -> Iterator[Problem]:
    """Warnings for ``remember`` keys that no input or step provides (a typo is never kept)."""
    plan = t.plan
    if not plan.remember:
        return
    provided: set[str] = set()
    if plan.inputs_schema is not None:
        provided |= set(plan.inputs_schema.properties)
    for trigger in plan.all_triggers():
        provided |= set(trigger.input)
    for outputs in t.outputs.values():
        provided |= outputs
    for j, key in enumerate(plan.remember):
        if key not in provided:
            yield Problem(
                f"remember[{j}]",
                f"{key!r} is provided by no input or step, so it is only remembered when a run "
                "input of that name is given",
                f"fix the name ({_close(key, provided)}), or declare it in inputs_schema",
            )


def _editable_problems(t: Topology) -> Iterator[Problem]:
    """Errors for an approval's editable keys that nothing provides and no type declares.

    Such a key is a typo (``totl`` for ``total``: the approver would edit a field nothing reads
    back) or a field the approver fills in, which must say its type, or an empty list would come
    back as a string (issue 26).
    """
    for step in t.steps():
        spec = step.approval
        if spec is None:
            continue
        path = f"{t.sp(step.step_id)}.approval"
        for key in spec.editable_types:
            if key not in spec.editable_keys:
                yield Problem(
                    f"{path}.editable_types.{key}",
                    f"{key!r} is not one of editable_keys",
                    "add it to editable_keys, or remove it here "
                    f"({_close(key, spec.editable_keys)})",
                )
        available = _available(t, step)
        if available is None:
            continue
        for j, key in enumerate(spec.editable_keys):
            if root_key(key) in available or key in spec.editable_types:
                continue
            yield Problem(
                f"{path}.editable_keys[{j}]",
                f"{key!r} is provided by no input or earlier step, and has no declared type",
                f"fix the name ({_close(key, available)}), or, if the approver fills it in, "
                f"declare its type: editable_types: {{{key}: text}} (or number, yes_no, list, "
                "json)",
            )


def _close(key: str, names: Iterable[str]) -> str:
    """``did you mean 'total'?``, or that nothing is close."""
    import difflib

    found = difflib.get_close_matches(key, sorted(names), n=1)
    return f"did you mean {found[0]!r}?" if found else "no key of that name is close"


def _available(t: Topology, step: PlanStep) -> set[str] | None:
    """The keys an input or an earlier step provides to ``step`` (``None``: unknown, because
    an edge into it could not be wired, which is reported)."""
    sid = step.step_id
    # Everything that can run before the step, through any edge (a review loop's feedback
    # reaches the steps it sends the run back to); the step itself only when it lies on a cycle.
    ancestors = reach([e.source for e in t.inc[sid]], t.inc, None, backwards=True)
    if sid in t.dangling or t.dangling & set(ancestors):
        return None
    # What earlier steps wrote, their results under their ids (analyze.output), and what the
    # step's own pre hooks write before it runs.
    available = _run_inputs(t.plan) | set(ancestors) | hook_outputs(step.hooks, "pre")
    for ancestor in ancestors:
        available |= t.outputs[ancestor]
    loop = t.loop_of.get(sid)
    while loop is not None:
        if loop in t.loops:
            available |= {t.loops[loop].item_key, t.loops[loop].index_key}
        loop = t.loop_of.get(loop)
    return available


def step_reads(t: Topology, step: PlanStep) -> Iterator[Read]:
    """(field path, key, description) for every ``shared_context`` key ``step`` reads
    (public for :mod:`langorch.domain.version_diff`)."""
    return _reads(t, step)


def _reads(t: Topology, step: PlanStep) -> Iterator[Read]:
    """(path, key, description) for every ``shared_context`` key a step reads."""
    sid = step.step_id
    path, kind = t.sp(sid), t.specs[sid]
    yield from reads_of(step, t.blocks[sid], kind, path)
    if kind is None:
        return
    # Hooks read what the step reads, and what hooks before them wrote; post hooks also what
    # the step itself wrote.
    own = hook_outputs(step.hooks) | t.outputs.get(sid, frozenset())
    for field_path, text, how in hook_templates(step.hooks, path):
        try:
            names = template_names(text, how)
        except TemplateError:
            continue  # reported as a syntax problem
        for name in sorted(names - own):
            yield field_path, name, "reads"


# --------------------------------------------------------------------------------------------
# Asking a person to fix a failed step (on_error: ask, on_failure: ask)
# --------------------------------------------------------------------------------------------


def _ask_problems(t: Topology) -> Iterator[Problem]:
    """Someone to ask, a step that can be asked about, and ``ask:`` settings that take effect."""
    plan = t.plan
    plan_settings_used = False
    for step in t.steps():
        path, kind = t.sp(step.step_id), t.specs[step.step_id]
        if t.asks(step.on_error) and kind is not None and kind.parks:
            yield Problem(
                f"{path}.on_error",
                f"a {kind.name} step cannot ask for a fix: it waits or runs other steps, so "
                "there is no failed attempt of its own to retry or skip",
                "route on_error to a step, or put on_error: ask on the steps it runs",
            )
            continue
        asking = t.asking(step)
        if asking is None:
            if step.ask is not None:
                yield Problem(
                    f"{path}.ask",
                    "ask has no effect: a failure of this step asks nobody",
                    "set on_error: ask on the step (or on_failure: ask on the workflow), or "
                    "remove ask",
                )
            continue
        if step.ask is not None:
            yield from _ask_settings(step.ask, plan, f"{path}.ask")
        elif plan.ask is not None:
            plan_settings_used = True
        elif asking == "on_error" and not plan.approvers:
            yield _nobody_to_ask(f"{path}.on_error", f"{path}.ask.approvers")
        else:
            plan_settings_used = True
    if plan.ask is not None:
        if plan_settings_used:
            yield from _ask_settings(plan.ask, plan, "ask")
        else:
            yield Problem(
                "ask",
                "ask has no effect: no step's failure asks with the workflow's settings",
                "set on_failure: ask (or on_error: ask on a step without ask of its own), or "
                "remove ask",
            )
    elif plan_settings_used and not plan.approvers:
        yield _nobody_to_ask("on_failure", "ask.approvers")


def _ask_settings(spec: AskSpec, plan: TaskPlan, path: str) -> Iterator[Problem]:
    """An ``ask:``: someone to ask, addresses and policy that hold, templates that parse."""
    approvers = spec.approvers or plan.approvers
    if not approvers:
        yield Problem(
            f"{path}.approvers",
            "nobody is asked to fix the failed step: no approvers here or on the workflow",
            f"list approver emails in {path}.approvers (or in the workflow's approvers)",
        )
    yield from identity_problems(spec.approvers, f"{path}.approvers")
    yield from policy_problems(spec.policy(), approvers, path)
    for name in ("title", "message"):
        error = check(getattr(spec, name))
        if error is not None:
            yield _syntax_problem(f"{path}.{name}", "template", error)


def _nobody_to_ask(path: str, where: str) -> Problem:
    value = path.rsplit(".", 1)[-1]
    return Problem(
        path,
        f"{value}: ask has nobody to ask: neither ask.approvers nor the workflow's approvers "
        "name anyone",
        f"add {where}: [you@example.com], or approvers: [...] to the workflow",
    )


def _ask_warnings(t: Topology) -> Iterator[Problem]:
    """``ask`` in a plan with a step named ``ask``: it routes there, and asks nobody."""
    if ASK not in t.index:
        return
    routes = [(f"{t.sp(s.step_id)}.on_error", s.on_error) for s in t.steps()]
    for path, route in [*routes, ("on_failure", t.plan.on_failure)]:
        if route == ASK:
            yield Problem(
                path,
                f"{ASK!r} routes to the step named {ASK!r}, not to a person",
                f"to ask a person to fix failed steps, rename step {ASK!r}",
            )


# --------------------------------------------------------------------------------------------
# Plan-level settings and registries
# --------------------------------------------------------------------------------------------


def _plan_problems(plan: TaskPlan) -> Iterator[Problem]:
    """Triggers, schedules, default approvers and the inputs schema."""
    for i, trigger in enumerate(plan.triggers):
        path = f"triggers[{i}]"
        if trigger.type == "schedule":
            if trigger.schedule is None:
                yield Problem(
                    f"{path}.schedule",
                    "a schedule trigger needs a schedule",
                    "add schedule: {cron_expression: '0 9 * * 1', timezone: 'UTC'}",
                )
            else:
                yield from _schedule_problems(f"{path}.schedule", trigger.schedule)
        elif trigger.schedule is not None:
            yield _ignored_trigger(f"{path}.schedule", trigger.type)
        if trigger.catch_up is not None and trigger.type != "schedule":
            yield _ignored_trigger(f"{path}.catch_up", trigger.type)
        if trigger.type == "s3":
            if not (trigger.bucket or trigger.prefix or trigger.suffix):
                yield Problem(
                    path,
                    "an s3 trigger needs at least one of bucket, prefix or suffix",
                    "e.g. prefix: invoices/ and suffix: .pdf",
                )
        else:
            for name in ("bucket", "prefix", "suffix"):
                if getattr(trigger, name):
                    yield _ignored_trigger(f"{path}.{name}", trigger.type)
        yield from _event_trigger_problems(trigger, path)
        if trigger.sender_field is not None and trigger.type != "webhook":
            yield _ignored_trigger(f"{path}.sender_field", trigger.type)
        elif trigger.sender_field is not None and not trigger.sender_field.strip():
            yield Problem(
                f"{path}.sender_field",
                "sender_field is empty",
                "name the body's key holding the sender's email, e.g. sender_field: requested_by",
            )
    if plan.schedule is not None:
        yield from _schedule_problems("schedule", plan.schedule)
    yield from budget_problems(plan.budget, plan.approvers)
    yield from tool_policy_problems(plan.tool_policies, plan.approvers)
    for key in plan.prices or {}:
        problem = key_problem(key, f"prices.{key}")
        if problem is not None:
            yield problem
    yield from identity_problems(plan.approvers, "approvers")
    if plan.inputs_schema is not None:
        for j, key in enumerate(plan.inputs_schema.required):
            if key not in plan.inputs_schema.properties:
                yield Problem(
                    f"inputs_schema.required[{j}]",
                    f"required input {key!r} is not among the properties",
                    f"declare {key!r} in inputs_schema.properties",
                )


EVENT_BUS_NAME = re.compile(r"^[A-Za-z0-9._\-/]{1,256}$")
"""EventBridge's rule for bus names (a partner bus holds ``/``)."""


def _event_trigger_problems(trigger: Trigger, path: str) -> Iterator[Problem]:
    """An event trigger's pattern and bus; the event fields on any other trigger type."""
    fields = ("bus", "pattern", "event_input")
    if trigger.type != "event":
        for name in fields:
            if getattr(trigger, name) is not None:
                yield _ignored_trigger(f"{path}.{name}", trigger.type)
        return
    if trigger.pattern is None:
        yield Problem(
            f"{path}.pattern",
            "an event trigger needs a pattern",
            'e.g. pattern: {source: [shop.orders], detail-type: ["Order Placed"]}',
        )
    else:
        yield from pattern_problems(trigger.pattern, f"{path}.pattern")
    if trigger.bus is not None and not EVENT_BUS_NAME.match(trigger.bus):
        yield Problem(
            f"{path}.bus",
            f"{trigger.bus!r} is not an EventBridge bus name",
            "use default or a name of letters, digits and . _ - / (up to 256)",
        )


def _provider_problems(t: Topology, providers: frozenset[str] | None) -> Iterator[Problem]:
    """LLM providers the steps, their blocks and the plan name must be available.

    ``None`` skips the check (what ``step_graph`` checked before: nothing).
    """
    if providers is None:
        return
    for step in t.steps():
        path = f"{t.sp(step.step_id)}.block_id"
        block = t.blocks[step.step_id]
        if block is not None and block.llm_provider and block.llm_provider not in providers:
            problem = _unknown_provider(path, block.llm_provider, providers)
            yield Problem(path, f"block {block.block_id!r} uses {problem.message}", problem.hint)
        if step.llm_provider and step.llm_provider not in providers:
            yield _unknown_provider(
                f"{t.sp(step.step_id)}.llm_provider", step.llm_provider, providers
            )
    if t.plan.llm_provider and t.plan.llm_provider not in providers:
        yield _unknown_provider("llm_provider", t.plan.llm_provider, providers)


def _tool_warnings(t: Topology, tools: frozenset[str] | None) -> Iterator[Problem]:
    """Tools the steps' blocks need that nothing binds yet (``None``: no check)."""
    if tools is None:
        return
    for step in t.steps():
        for path, tool in hook_tools(step.hooks, t.sp(step.step_id)):
            if tool not in tools:
                yield _unbound_tool(path, tool, tools)
        block = t.blocks[step.step_id]
        if block is None:
            continue
        for tool in block.tools_required:
            if tool not in tools:
                path = f"{t.sp(step.step_id)}.block_id"
                yield _unbound_tool(path, tool, tools, needed_by=block.block_id)


def _cron_is_valid(expression: str) -> bool:
    # Imported here: croniter costs ~0.5x an `import boto3`, and only `put`/`validate` need it.
    from croniter import croniter

    return bool(croniter.is_valid(expression))


def _schedule_problems(path: str, schedule: ScheduleSpec) -> list[Problem]:
    from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

    problems: list[Problem] = []
    hint = "write minute hour day-of-month month day-of-week, e.g. '0 12 * * 2'"
    fields = schedule.cron_expression.split()
    if len(fields) != 5:
        problems.append(
            Problem(
                f"{path}.cron_expression",
                f"{schedule.cron_expression!r} has {len(fields)} fields, not 5",
                hint,
            )
        )
    elif not _cron_is_valid(schedule.cron_expression):
        problems.append(
            Problem(
                f"{path}.cron_expression",
                f"{schedule.cron_expression!r} is not a valid cron expression",
                hint,
            )
        )
    try:
        ZoneInfo(schedule.timezone)
    except (ZoneInfoNotFoundError, ValueError):
        problems.append(
            Problem(
                f"{path}.timezone",
                f"unknown timezone {schedule.timezone!r}",
                "use an IANA name such as 'UTC' or 'Europe/Paris'",
            )
        )
    return problems


# --------------------------------------------------------------------------------------------
# Problems
# --------------------------------------------------------------------------------------------


def _syntax_problem(path: str, how: str, error: str) -> Problem:
    return Problem(
        path,
        f"malformed {how}: {error}",
        "fix the syntax; templates use {{ name }} (or seed 000's {name}), "
        "expressions look like x > 3",
    )


def _unbound_tool(path: str, tool: str, tools: frozenset[str], *, needed_by: str = "") -> Problem:
    what = (
        f"block {needed_by!r} needs tool {tool!r}, which is not bound in this deployment"
        if needed_by
        else f"tool {tool!r} is not bound in this deployment"
    )
    return Problem(
        path,
        what,
        f"the block runs; a step fails only if its model calls {tool!r} while it is unbound. "
        f"Bound tools: {', '.join(sorted(tools)) or '(none)'}",
    )


def _unknown_provider(path: str, provider: str, providers: frozenset[str]) -> Problem:
    return Problem(
        path,
        f"unknown LLM provider {provider!r}",
        f"available providers are {', '.join(sorted(providers)) or '(none)'}",
    )


def _ignored_setting(path: str, kind: str) -> Problem:
    name = path.rsplit(".", 1)[-1]
    return Problem(
        path,
        f"{name} is set but this is a {kind} step, which ignores it",
        "remove it, or change the kind",
    )


def _ignored_trigger(path: str, trigger_type: str) -> Problem:
    name = path.rsplit(".", 1)[-1]
    return Problem(
        path, f"a {trigger_type} trigger ignores {name}", "remove it, or change the trigger type"
    )
