"""Compile a CKP procedure into the internal plan the engine runs (seed 001 §4.1).

A procedure becomes a :class:`~langorch.domain.definitions.TaskPlan`: each node one step of the
kind that has the node type's semantics, so the one engine runs both formats and a second one is
never needed. Deterministic: the same document gives the same plan. Every problem is reported at
once with its JSON path in the document (``workflow_graph.nodes.fetch.steps[2].action``).

=================  ===========================================================================
node type          step
=================  ===========================================================================
sequence           ``sequence``: the steps in order, then ``validations``
processing         ``sequence``: its ``operations`` (built-in actions) and ``steps``
transform          ``sequence``: its ``transformations`` (filter, map, sort, …)
parallel           ``sequence`` with no steps (a fork); ``next_node`` joins every branch
logic              ``decision``: ``rules`` in order (first true wins), else ``default_next_node``
loop               ``loop``: ``iterator`` / ``iterator_variable`` / ``index_variable`` over the
                   nodes from ``body_node``; ``collect_variable``, ``max_iterations``;
                   ``continue_on_error`` routes a failing body node to the next item
verification       ``verification``: ``checks`` with ``on_fail`` fail / warn / a node
llm_action         ``llm_action``: the prompt and ``outputs`` mappings
human_approval     ``approval``: ``on_approve`` / ``on_reject`` / ``on_timeout``, escalation
subflow            ``subflow``: another ``procedure_id``, ``input_mapping``, ``output_mapping``
terminate          ``terminate``: status and outputs (``final_audit_log``, cleanup and error
                   actions run first, in a ``sequence`` step that takes the node's id)
=================  ===========================================================================

Node ids become step ids, so the timeline, the console and ``error.node_id`` name the nodes the
author wrote. Templates and conditions are rewritten once, here
(:mod:`langorch.domain.ckp.expressions`); ``{{secrets.NAME}}`` becomes a reference to the secret
that ``global_config.secrets_config.secret_references`` names (else ``NAME``), resolved only when
a step runs. Bindings to agents and tools are the deployment's: checked when the procedure is
stored (:mod:`langorch.domain.ckp.binding`), not here.
"""

from __future__ import annotations

import json
import math
import re
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from pydantic import ValidationError

from langorch.domain.ckp.expressions import translate_condition, translate_template, variable_of
from langorch.domain.ckp.lifecycle import effective_date_of
from langorch.domain.definitions import IDENTIFIER, TaskPlan
from langorch.domain.errors import DefinitionError, Problem
from langorch.domain.kinds.verification import PASSED

NODE_TYPES = (
    "sequence", "logic", "loop", "parallel", "processing", "verification", "llm_action",
    "human_approval", "transform", "subflow", "terminate",
)  # fmt: skip
"""Seed 001 §3.2's node types."""

STATUSES = ("active", "approved", "draft", "inactive")
"""A procedure's ``status``. Only ``active`` and ``approved`` procedures run from a trigger."""

TRIGGER_TYPES = ("manual", "scheduled", "webhook", "event", "file_watch")

KNOWN_TOP_LEVEL = frozenset(
    {
        "procedure_id", "version", "status", "effective_date", "description", "title", "name",
        "trigger", "retrieval_metadata", "global_config", "variables_schema", "workflow_graph",
        "provenance", "approvers", "langorch",
    }
)  # fmt: skip

_COMMON = frozenset(
    {
        "type", "agent", "title", "description", "inputs", "outputs", "next_node",
        "is_checkpoint", "sla", "telemetry", "idempotency_key", "error_handlers", "tags",
        "timeout_ms", "langorch",
    }
)  # fmt: skip
_FIELDS: dict[str, frozenset[str]] = {
    "sequence": frozenset({"steps", "validations"}),
    "processing": frozenset({"operations", "steps", "validations"}),
    "transform": frozenset({"transformations"}),
    "parallel": frozenset({"branches", "wait_strategy", "branch_failure"}),
    "logic": frozenset({"rules", "default_next_node"}),
    "loop": frozenset(
        {
            "iterator",
            "iterator_variable",
            "index_variable",
            "body_node",
            "collect_variable",
            "max_iterations",
            "continue_on_error",
        }
    ),
    "verification": frozenset({"checks"}),
    "llm_action": frozenset(
        {
            "prompt",
            "system_prompt",
            "model",
            "provider",
            "temperature",
            "max_tokens",
            "attachments",
            "retry",
            "output_types",
            "block_id",
        }
    ),
    "human_approval": frozenset(
        {
            "prompt",
            "decision_type",
            "options",
            "timeout_ms",
            "timeout_action",
            "escalation_contact",
            "escalate_after_ms",
            "context_data",
            "approval_level",
            "on_approve",
            "on_reject",
            "on_timeout",
            "approvers",
            "editable_fields",
            "require_code",
        }
    ),
    "subflow": frozenset(
        {
            "procedure_id",
            "version",
            "input_mapping",
            "output_mapping",
            "on_failure",
            "inherit_context",
        }
    ),
    "terminate": frozenset(
        {"status", "cleanup_actions", "error_actions", "final_audit_log", "message"}
    ),
}
_STEP_CORE = frozenset(
    {
        "step_id", "action", "type", "output_variable", "timeout_ms", "wait_ms",
        "wait_after_ms", "continue_on_error", "retry_on_failure", "description",
    }
)  # fmt: skip
_ID = re.compile(IDENTIFIER)
_SECRET = re.compile(r"(?<![\w.])secrets\.([A-Za-z_][A-Za-z0-9_\-]*)")
EXTENSION = "langorch"
"""A node's (or the procedure's) field for what CKP has no words for (``export --ckp``)."""

_MAX_TIMEOUT_MS = 900_000
_UNBOUNDED = 10_000
_TAKE_INPUTS = frozenset({"sequence", "processing"})
_TAKE_OUTPUTS = frozenset({"sequence", "processing", "llm_action", "terminate"})
_TYPES = ("string", "number", "integer", "boolean", "array", "object")
_TERMINATE_END = "__end"
_SUBFLOW_OUT = "__outputs"
_SUCCEEDED = {"success", "succeeded", "completed", "complete", "ok"}
_FAILED = {"failed", "failure", "error", "fail"}


@dataclass
class Compiled:
    """A compiled procedure: the plan and what is accepted but worth a look."""

    plan: TaskPlan
    warnings: list[Problem] = field(default_factory=list)


def ckp_text(document: dict[str, Any]) -> str:
    """The document as stored and shown: JSON in the author's key order."""
    return json.dumps(document, indent=2, ensure_ascii=False)


def compile_procedure(document: dict[str, Any]) -> Compiled:
    """Compile a CKP procedure into a plan.

    Args:
        document: The parsed procedure.

    Returns:
        The plan (with the document kept in ``ckp``) and the warnings.

    Raises:
        DefinitionError: ``procedure <id>`` with every problem, each at its JSON path.
    """
    compiler = _Compiler(document)
    plan = compiler.run()
    if compiler.problems or plan is None:
        subject = f"procedure {document.get('procedure_id') or '(no procedure_id)'}"
        raise DefinitionError(subject, compiler.problems)
    return Compiled(plan, compiler.warnings)


def node_path(node_id: str) -> str:
    """The JSON path of a node."""
    return f"workflow_graph.nodes.{node_id}"


_STEP_PATH = re.compile(r"^steps\[(\d+)\](.*)$")


def ckp_path(plan: TaskPlan, path: str) -> str:
    """A compiled plan's path (``steps[3].settings.steps[1].params.url``) as the procedure's
    (``workflow_graph.nodes.fetch.steps[1].url``): problems name what the author wrote."""
    match = _STEP_PATH.match(path)
    if match is None or int(match.group(1)) >= len(plan.steps):
        return path
    node = plan.steps[int(match.group(1))].step_id.split("__")[0]
    rest = match.group(2)
    for generated in (".settings", ".params"):
        rest = rest.replace(generated + ".", ".")
        rest = rest.removesuffix(generated)
    return node_path(node) + rest


class _Compiler:
    def __init__(self, document: dict[str, Any]) -> None:
        self.doc = document
        self.problems: list[Problem] = []
        self.warnings: list[Problem] = []
        self.nodes: dict[str, dict[str, Any]] = {}
        self.steps: dict[str, dict[str, Any]] = {}
        """Step id -> the PlanStep being built (node ids, plus generated tails)."""
        self.entry_of: dict[str, str] = {}
        """Node id -> the step a route to the node goes to (itself, or its pre-step)."""
        self.exit_of: dict[str, str] = {}
        """Node id -> the step its ``next_node`` leaves from."""
        self.ext: dict[str, dict[str, Any]] = {}
        """Node id -> its ``langorch`` field: step fields CKP has no words for (a block
        reference, an approval's policy…), written by ``export --ckp`` and applied last."""
        config = document.get("global_config")
        self.config: dict[str, Any] = config if isinstance(config, dict) else {}
        secrets = self.config.get("secrets_config")
        refs = secrets.get("secret_references") if isinstance(secrets, dict) else None
        self.secret_refs: dict[str, str] = (
            {str(k): str(v) for k, v in refs.items()} if isinstance(refs, dict) else {}
        )

    # -- problems -----------------------------------------------------------------------------

    def add(self, path: str, message: str, hint: str = "") -> None:
        self.problems.append(Problem(path, message, hint))

    def warn(self, path: str, message: str, hint: str = "") -> None:
        self.warnings.append(Problem(path, message, hint))

    # -- the procedure ------------------------------------------------------------------------

    def run(self) -> TaskPlan | None:
        doc = self.doc
        procedure_id = doc.get("procedure_id")
        if not isinstance(procedure_id, str) or not _ID.match(procedure_id):
            self.add(
                "procedure_id",
                "required field 'procedure_id' is missing"
                if procedure_id is None
                else f"{procedure_id!r} is not a valid procedure id",
                "start with a letter, then letters, digits, '_' or '-' (at most 128 characters)",
            )
        for key in doc:
            if key not in KNOWN_TOP_LEVEL:
                self.warn(str(key), f"unknown field {key!r} is kept but not used")
        self._status_and_date()
        graph = doc.get("workflow_graph")
        if not isinstance(graph, dict):
            self.add(
                "workflow_graph",
                "required field 'workflow_graph' is missing or not a mapping",
                "add workflow_graph: {start_node: <id>, nodes: {<id>: {type: …}}}",
            )
            return None
        nodes = graph.get("nodes")
        if not isinstance(nodes, dict) or not nodes:
            self.add("workflow_graph.nodes", "a procedure needs at least one node")
            return None
        self.nodes = {str(k): v for k, v in nodes.items()}
        start = graph.get("start_node")
        if not isinstance(start, str):
            self.add("workflow_graph.start_node", "required field 'start_node' is missing")
        elif start not in self.nodes:
            self._unknown_node("workflow_graph.start_node", start)
        for node_id, node in self.nodes.items():
            self._node(node_id, node)
        self._wire()
        self._extensions()
        on_failure = self.config.get("on_failure")
        if on_failure is not None:
            self._check_ref("global_config.on_failure", on_failure)
        if isinstance(start, str) and start in self.nodes:
            self._reachability(start, on_failure if isinstance(on_failure, str) else None)
        triggers = self._triggers()
        inputs_schema = self._variables()
        if self.problems:
            return None
        plan = {
            "plan_id": procedure_id,
            "name": str(doc.get("title") or doc.get("name") or ""),
            "description": str(doc.get("description") or ""),
            "user_intent": _intent(doc),
            "steps": list(self.steps.values()),
            "entry_step_id": self.entry_of.get(start) if isinstance(start, str) else None,
            "triggers": triggers,
            "inputs_schema": inputs_schema,
            "on_failure": self.entry_of.get(on_failure) if isinstance(on_failure, str) else None,
            "memory": False,
            "approvers": _strings(doc.get("approvers")),
            "category": _domain(doc),
            "tags": _keywords(doc),
            "ckp": ckp_text(doc),
        }
        extra = doc.get(EXTENSION)
        if isinstance(extra, dict):
            plan.update(extra)
        try:
            return TaskPlan.model_validate(plan)
        except ValidationError as exc:
            self._plan_errors(exc)
            return None

    def _status_and_date(self) -> None:
        status = self.doc.get("status")
        if status is not None and status not in STATUSES:
            self.add("status", f"{status!r} is not a procedure status", f"use one of {STATUSES}")
        effective = self.doc.get("effective_date")
        if effective is not None and effective_date_of(effective) is None:
            self.add(
                "effective_date",
                f"{effective!r} is not a date",
                "write YYYY-MM-DD (or an ISO-8601 date and time)",
            )

    def _plan_errors(self, exc: ValidationError) -> None:
        order = list(self.steps)
        for error in exc.errors():
            loc = list(error["loc"])
            path = ".".join(str(p) for p in loc)
            if loc[:1] == ["steps"] and len(loc) > 1 and isinstance(loc[1], int):
                rest = ".".join(str(p) for p in loc[2:])
                path = node_path(order[loc[1]].split("__")[0]) + (f" ({rest})" if rest else "")
            self.add(path, error["msg"], "fix the node's value")

    # -- nodes --------------------------------------------------------------------------------

    def _node(self, node_id: str, node: Any) -> None:
        path = node_path(node_id)
        if not _ID.match(node_id):
            self.add(
                path,
                f"{node_id!r} is not a valid node id",
                "start with a letter, then letters, digits, '_' or '-'",
            )
            return
        if "__" in node_id:
            self.add(path, f"{node_id!r} contains '__'", "'__' is kept for generated steps")
            return
        if not isinstance(node, dict):
            self.add(path, "a node is a mapping", "write {type: sequence, steps: […], …}")
            return
        kind = node.get("type")
        if kind not in NODE_TYPES:
            self.add(
                f"{path}.type",
                "required field 'type' is missing"
                if kind is None
                else f"{kind!r} is not a node type",
                f"use one of {', '.join(NODE_TYPES)}",
            )
            return
        for key in node:
            if key not in _COMMON and key not in _FIELDS[kind]:
                self.warn(
                    f"{path}.{key}",
                    f"a {kind} node does not use {key!r}; it is kept but ignored",
                    f"{kind} nodes use {', '.join(sorted(_FIELDS[kind]))}",
                )
        for key, users in (("inputs", _TAKE_INPUTS), ("outputs", _TAKE_OUTPUTS)):
            if key in node and kind not in users:
                self.warn(
                    f"{path}.{key}",
                    f"a {kind} node does not use {key!r}; it is kept but ignored",
                    f"{key} apply to {', '.join(sorted(users))} nodes",
                )
        self.entry_of[node_id] = self.exit_of[node_id] = node_id
        step: dict[str, Any] = {"step_id": node_id, "name": _title(node)}
        self.steps[node_id] = step  # before the handler: generated tails come after it
        getattr(self, f"_{kind}")(node_id, node, path, step)
        self._policies(node_id, node, path, kind)
        ext = node.get(EXTENSION)
        if ext is not None:
            if isinstance(ext, dict):
                self.ext[node_id] = ext
            else:
                self.add(f"{path}.{EXTENSION}", "the langorch field is a mapping of step fields")

    def _policies(self, node_id: str, node: dict[str, Any], path: str, kind: str) -> None:
        """Retries, timeouts and fallbacks from the node's and the procedure's settings."""
        step = self.steps[node_id]
        if kind in ("sequence", "processing", "transform", "llm_action", "verification"):
            retries, delay = self._retries(node, path)
            if retries is not None:
                step["max_retries"] = retries
            if delay is not None:
                step["retry_backoff_seconds"] = delay
            timeout = self._timeout(node, path)
            if timeout is not None:
                step["timeout_seconds"] = timeout
        handlers = node.get("error_handlers")
        for i, handler in enumerate(handlers if isinstance(handlers, list) else []):
            fallback = handler.get("fallback_node") if isinstance(handler, dict) else None
            if fallback is not None and self._check_ref(
                f"{path}.error_handlers[{i}].fallback_node", fallback
            ):
                step.setdefault("on_error", fallback)

    def _retries(self, node: dict[str, Any], path: str) -> tuple[int | None, float | None]:
        retries = self.config.get("max_retries")
        delay_ms = self.config.get("retry_delay_ms")
        handlers = node.get("error_handlers")
        for handler in handlers if isinstance(handlers, list) else []:
            if isinstance(handler, dict) and handler.get("action") == "retry":
                retries = handler.get("max_retries", 2)
                policy = handler.get("retry_policy")
                delay_ms = handler.get("delay_ms") or (
                    policy.get("base_delay_ms") if isinstance(policy, dict) else None
                )
        retry = node.get("retry")
        if isinstance(retry, dict):
            retries = retry.get("max_retries", retries)
            delay_ms = retry.get("delay_ms", delay_ms)
        if retries is not None and (not isinstance(retries, int) or not 0 <= retries <= 10):
            self.add(f"{path}.error_handlers", f"max_retries {retries!r} is not 0 to 10")
            retries = None
        delay = None
        if isinstance(delay_ms, int | float) and delay_ms >= 0:
            delay = min(float(delay_ms) / 1000, 60.0)
        return retries, delay

    def _timeout(self, node: dict[str, Any], path: str) -> int | None:
        sla = node.get("sla")
        for where, value in (
            (f"{path}.timeout_ms", node.get("timeout_ms")),
            (
                f"{path}.sla.max_duration_ms",
                sla.get("max_duration_ms")
                if isinstance(sla, dict) and sla.get("on_breach") == "fail"
                else None,
            ),
            ("global_config.timeout_ms", self.config.get("timeout_ms")),
        ):
            if value is None:
                continue
            if not isinstance(value, int | float) or not 0 < value <= _MAX_TIMEOUT_MS:
                self.add(
                    where,
                    f"{value!r} is not a time in ms of at most {_MAX_TIMEOUT_MS}",
                    "a node runs within one segment (a Lambda: 15 minutes); split longer work "
                    "across nodes",
                )
                return None
            return max(1, math.ceil(value / 1000))
        return None

    # -- node types ---------------------------------------------------------------------------

    def _sequence(
        self, node_id: str, node: dict[str, Any], path: str, step: dict[str, Any]
    ) -> None:
        steps: list[dict[str, Any]] = []
        steps += self._inputs(node, path)
        steps += self._actions(node.get("steps"), f"{path}", "steps", required=True)
        steps += self._outputs_as_steps(node, path)
        settings: dict[str, Any] = {"steps": steps}
        self._settings_common(node, path, settings)
        settings["checks"] = self._checks(node.get("validations"), path, "validations")
        step.update(kind="sequence", settings=_pruned(settings))

    def _processing(
        self, node_id: str, node: dict[str, Any], path: str, step: dict[str, Any]
    ) -> None:
        steps = self._inputs(node, path)
        steps += self._actions(node.get("operations"), path, "operations", required=False)
        steps += self._actions(node.get("steps"), path, "steps", required=False)
        if "operations" not in node and "steps" not in node:
            self.add(f"{path}.operations", "a processing node needs operations")
        steps += self._outputs_as_steps(node, path)
        settings: dict[str, Any] = {"steps": steps}
        self._settings_common(node, path, settings)
        settings["checks"] = self._checks(node.get("validations"), path, "validations")
        step.update(kind="sequence", settings=_pruned(settings))

    def _transform(
        self, node_id: str, node: dict[str, Any], path: str, step: dict[str, Any]
    ) -> None:
        items = node.get("transformations")
        if not isinstance(items, list) or not items:
            self.add(f"{path}.transformations", "a transform node needs transformations")
            items = []
        steps = []
        for i, item in enumerate(items):
            where = f"{path}.transformations[{i}]"
            if not isinstance(item, dict):
                self.add(where, "a transformation is a mapping")
                continue
            op = {k: v for k, v in item.items() if k != "type"}
            op["action"] = item.get("type")
            op.setdefault("step_id", f"{item.get('type') or 'transform'}{i + 1}")
            compiled = self._action(op, where, f"transformations[{i}]", i)
            if compiled is not None:
                steps.append(compiled)
        settings: dict[str, Any] = {"steps": steps}
        self._settings_common(node, path, settings)
        step.update(kind="sequence", settings=_pruned(settings))

    def _parallel(
        self, node_id: str, node: dict[str, Any], path: str, step: dict[str, Any]
    ) -> None:
        strategy = node.get("wait_strategy", "all")
        if strategy != "all":
            self.warn(
                f"{path}.wait_strategy",
                f"wait_strategy {strategy!r} runs as 'all': the next node waits for every branch",
                "remove it, or set it to all",
            )
        if node.get("branch_failure", "stop") not in ("stop", "fail"):
            self.warn(
                f"{path}.branch_failure",
                "a failing branch fails the node's run (or goes to its error route)",
                "give the branch's nodes an error_handlers fallback_node to carry on",
            )
        branches = node.get("branches")
        if not isinstance(branches, list) or not branches:
            self.add(f"{path}.branches", "a parallel node needs branches")
        step.update(kind="sequence", settings={})

    def _logic(self, node_id: str, node: dict[str, Any], path: str, step: dict[str, Any]) -> None:
        rules = node.get("rules")
        if not isinstance(rules, list) or not rules:
            self.add(f"{path}.rules", "a logic node needs rules")
            rules = []
        cases = []
        for i, rule in enumerate(rules):
            where = f"{path}.rules[{i}]"
            if not isinstance(rule, dict) or not isinstance(rule.get("condition"), str):
                self.add(where, "a rule is {condition: <expression>, next_node: <node id>}")
                continue
            target = rule.get("next_node")
            if self._check_ref(f"{where}.next_node", target, required=True):
                cases.append({"when": self._condition(rule["condition"]), "branch": target})
        step.update(kind="decision", cases=cases)
        default = node.get("default_next_node")
        if default is not None and self._check_ref(f"{path}.default_next_node", default):
            step["default_branch"] = default

    def _loop(self, node_id: str, node: dict[str, Any], path: str, step: dict[str, Any]) -> None:
        iterator = node.get("iterator")
        if not isinstance(iterator, str) or not iterator.strip():
            self.add(f"{path}.iterator", "a loop needs an iterator (the list variable)")
            iterator = ""
        over = variable_of(iterator) or self._condition(iterator)
        body = node.get("body_node")
        self._check_ref(f"{path}.body_node", body, required=True)
        loop: dict[str, Any] = {
            "over": over,
            "body": [body] if isinstance(body, str) else [],
            "item_key": node.get("iterator_variable") or "item",
            "index_key": node.get("index_variable") or "index",
        }
        if node.get("collect_variable"):
            loop["collect_key"] = node["collect_variable"]
        if node.get("max_iterations") is not None:
            loop["max_iterations"] = node["max_iterations"]
        step.update(kind="loop", loop=loop)

    def _verification(
        self, node_id: str, node: dict[str, Any], path: str, step: dict[str, Any]
    ) -> None:
        checks = self._checks(node.get("checks"), path, "checks")
        if not checks and "checks" not in node:
            self.add(f"{path}.checks", "a verification node needs checks")
        step.update(kind="verification", settings={"checks": checks}, branches={})
        for check in checks:
            if check["on_fail"] == "route":
                step["branches"][check["id"]] = check["route_to"]

    def _llm_action(
        self, node_id: str, node: dict[str, Any], path: str, step: dict[str, Any]
    ) -> None:
        prompt = node.get("prompt")
        if not isinstance(prompt, str) or not prompt.strip():
            self.add(f"{path}.prompt", "an llm_action needs a prompt")
            prompt = "-"
        settings: dict[str, Any] = {"prompt": translate_template(prompt)}
        if isinstance(node.get("system_prompt"), str):
            settings["system_prompt"] = translate_template(node["system_prompt"])
        outputs = node.get("outputs") or {}
        if not isinstance(outputs, dict):
            self.add(f"{path}.outputs", "outputs map variable names to mappings")
            outputs = {}
        mapped: dict[str, str] = {}
        fields: list[str] = []
        for name, mapping in outputs.items():
            if not isinstance(mapping, str):
                self.add(f"{path}.outputs.{name}", "a mapping is text (json_extract: a.b, …)")
                continue
            head, _, rest = mapping.partition(":")
            if head.strip() == "json_extract":
                first = rest.strip().split(".", 1)[0].split("[", 1)[0]
                if first and first not in fields:
                    fields.append(first)
                mapped[name] = f"json_extract: {rest.strip()}"
            elif head.strip() == "regex":
                mapped[name] = mapping
            else:
                mapped[name] = translate_template(mapping)
        settings["outputs"] = mapped
        if fields:
            settings["output_keys"] = fields
        types = node.get("output_types")
        if isinstance(types, dict):
            settings["output_types"] = types
        step.update(kind="llm_action", settings=settings)
        for key, target in (("model", "llm_model"), ("provider", "llm_provider")):
            if isinstance(node.get(key), str):
                step[target] = node[key]
        for name in ("temperature", "max_tokens"):
            if node.get(name) is not None:
                settings[name] = node[name]

    def _human_approval(
        self, node_id: str, node: dict[str, Any], path: str, step: dict[str, Any]
    ) -> None:
        decision = node.get("decision_type", "approve_reject")
        if decision != "approve_reject":
            self.add(
                f"{path}.decision_type",
                f"decision_type {decision!r} is not supported: an approval here is approve or "
                "reject",
                "use approve_reject with on_approve / on_reject (and on_timeout)",
            )
        approvers = _strings(node.get("approvers"))
        if not approvers and not _strings(self.doc.get("approvers")):
            self.add(
                f"{path}.approvers",
                f"human_approval {node_id!r} names no approvers",
                "list who may decide: approvers: [email, …] on the node or the procedure",
            )
        prompt = str(node.get("prompt") or "")
        approval: dict[str, Any] = {
            "approvers": approvers,
            "title": translate_template(str(node.get("title") or node_id)),
            "message": translate_template(prompt),
        }
        shown, described = self._context_data(node.get("context_data"), f"{path}.context_data")
        approval["show_keys"] = shown
        if described:
            approval["message"] += "\n\n" + "\n".join(described)
        editable = _strings(node.get("editable_fields"))
        if editable:
            approval["editable_keys"] = editable
        if node.get("require_code") is True:
            approval["require_code"] = True
        timeout_ms = node.get("timeout_ms")
        if timeout_ms is not None:
            if not isinstance(timeout_ms, int | float) or timeout_ms <= 0:
                self.add(f"{path}.timeout_ms", f"{timeout_ms!r} is not a time in ms")
            else:
                approval["timeout_seconds"] = max(1, math.ceil(timeout_ms / 1000))
        action = node.get("timeout_action")
        if action is not None:
            mapped = {"auto_approve": "approve", "auto_reject": "reject", "escalate": "branch"}
            if action not in mapped:
                self.add(
                    f"{path}.timeout_action",
                    f"{action!r} is not a timeout action",
                    "use auto_approve, auto_reject or escalate",
                )
            else:
                approval["on_timeout"] = mapped[action]
        contact = node.get("escalation_contact")
        if contact is not None:
            after_ms = node.get("escalate_after_ms") or (
                (approval.get("timeout_seconds", 86_400) * 1000) // 2
            )
            approval["escalation"] = [
                {"after": max(1, math.ceil(after_ms / 1000)), "approvers": _strings(contact)}
            ]
        branches: dict[str, str] = {}
        for field_name, label in (
            ("on_approve", "approved"),
            ("on_reject", "rejected"),
            ("on_timeout", "timed_out"),
        ):
            target = node.get(field_name)
            if target is not None and self._check_ref(f"{path}.{field_name}", target):
                branches[label] = target
        if "approved" not in branches:
            self.add(f"{path}.on_approve", "a human_approval needs on_approve (a node id)")
        step.update(kind="approval", approval=approval, branches=branches)

    def _subflow(self, node_id: str, node: dict[str, Any], path: str, step: dict[str, Any]) -> None:
        child = node.get("procedure_id")
        if not isinstance(child, str) or not _ID.match(child):
            self.add(f"{path}.procedure_id", "a subflow names the procedure_id it runs")
            child = "missing"
        subflow: dict[str, Any] = {"workflow_id": child}
        version = node.get("version")
        if isinstance(version, int):
            subflow["version"] = version
        elif version is not None:
            self.warn(
                f"{path}.version",
                f"version {version!r} is the child's CKP version; the child runs at the "
                "latest stored version when this procedure is stored (pinned then)",
                "pin a stored version with an integer (`langorch workflows list`)",
            )
        inputs = node.get("input_mapping") or {}
        if not isinstance(inputs, dict):
            self.add(f"{path}.input_mapping", "input_mapping maps child variables to values")
            inputs = {}
        subflow["inputs"] = {
            str(k): (variable_of(str(v)) or translate_template(str(v))) for k, v in inputs.items()
        }
        outputs = node.get("output_mapping") or {}
        if not isinstance(outputs, dict):
            self.add(f"{path}.output_mapping", "output_mapping maps parent variables to child's")
            outputs = {}
        renames = {
            str(parent): variable_of(str(source)) or str(source)
            for parent, source in outputs.items()
        }
        subflow["outputs"] = sorted(set(renames.values()))
        step.update(kind="subflow", subflow=subflow)
        if any(parent != source for parent, source in renames.items()):
            tail = node_id + _SUBFLOW_OUT
            self.steps[tail] = {
                "step_id": tail,
                "kind": "transform",
                "depends_on": [node_id],
                "transform": {parent: source for parent, source in renames.items()},
            }
            self.exit_of[node_id] = tail

    def _terminate(
        self, node_id: str, node: dict[str, Any], path: str, step: dict[str, Any]
    ) -> None:
        status = str(node.get("status") or "success").lower()
        if status not in _SUCCEEDED | _FAILED:
            self.add(f"{path}.status", f"{status!r} is not an end status", "use success or failed")
        outputs_raw = node.get("outputs") or {}
        if not isinstance(outputs_raw, dict):
            self.add(f"{path}.outputs", "outputs map output names to values")
            outputs_raw = {}
        outputs: dict[str, str] = {}
        pre: list[dict[str, Any]] = []
        for name, value in outputs_raw.items():
            if isinstance(value, str) and "{{" in value:
                outputs[str(name)] = variable_of(value) or translate_template(value)
            elif isinstance(value, str):
                # Text without placeholders is the output itself, not a variable's name.
                outputs[str(name)] = "{{ " + json.dumps(value, ensure_ascii=False) + " }}"
            else:
                pre.append(_set(f"outputs.{name}", str(name), value))
                outputs[str(name)] = str(name)
        for field_name in ("cleanup_actions", "error_actions"):
            pre += self._actions(node.get(field_name), path, field_name, required=False)
        audit = node.get("final_audit_log")
        if audit is not None:
            pre.append(_set("final_audit_log", "final_audit_log", audit))
            outputs["final_audit_log"] = "final_audit_log"
        terminate: dict[str, Any] = {
            "status": "succeeded" if status in _SUCCEEDED else "failed",
            "outputs": outputs,
        }
        if isinstance(node.get("message"), str):
            terminate["message"] = translate_template(node["message"])
        if not pre:
            step.update(kind="terminate", terminate=terminate)
            return
        # Actions and the audit record first, in a step that takes the node's id (routes to the
        # node reach it); then the end itself.
        step.update(kind="sequence", settings={"steps": [_translated(s) for s in pre]})
        end = node_id + _TERMINATE_END
        self.steps[end] = {
            "step_id": end,
            "kind": "terminate",
            "depends_on": [node_id],
            "terminate": terminate,
        }

    # -- parts of nodes -----------------------------------------------------------------------

    def _settings_common(self, node: dict[str, Any], path: str, settings: dict[str, Any]) -> None:
        agent = node.get("agent")
        if agent is not None:
            settings["agent"] = str(agent)
        if isinstance(node.get("idempotency_key"), str):
            settings["idempotency_key"] = translate_template(node["idempotency_key"])
        settings["handlers"] = self._handlers(node.get("error_handlers"), path)

    def _inputs(self, node: dict[str, Any], path: str) -> list[dict[str, Any]]:
        """A node's ``inputs``: variables set before its steps (templates over the state)."""
        inputs = node.get("inputs")
        if inputs is None:
            return []
        if not isinstance(inputs, dict):
            self.add(f"{path}.inputs", "inputs map variable names to values")
            return []
        return [_translated(_set(f"inputs.{k}", str(k), v)) for k, v in inputs.items()]

    def _outputs_as_steps(self, node: dict[str, Any], path: str) -> list[dict[str, Any]]:
        """A sequence node's ``outputs``: variables set after its steps."""
        outputs = node.get("outputs")
        if outputs is None:
            return []
        if not isinstance(outputs, dict):
            self.add(f"{path}.outputs", "outputs map variable names to values")
            return []
        return [_translated(_set(f"outputs.{k}", str(k), v)) for k, v in outputs.items()]

    def _actions(
        self, items: Any, path: str, field_name: str, *, required: bool
    ) -> list[dict[str, Any]]:
        if items is None:
            if required:
                self.add(f"{path}.{field_name}", f"a sequence node needs {field_name}")
            return []
        if not isinstance(items, list):
            self.add(f"{path}.{field_name}", f"{field_name} is a list of steps")
            return []
        compiled = []
        for i, item in enumerate(items):
            where = f"{path}.{field_name}[{i}]"
            if not isinstance(item, dict):
                self.add(where, "a step is a mapping with an action")
                continue
            action = self._action(item, where, f"{field_name}[{i}]", i)
            if action is not None:
                compiled.append(action)
        return compiled

    def _action(
        self, item: dict[str, Any], where: str, at: str, index: int
    ) -> dict[str, Any] | None:
        action = item.get("action") or item.get("type")
        if not isinstance(action, str) or not action:
            self.add(f"{where}.action", "required field 'action' is missing")
            return None
        params = {k: v for k, v in item.items() if k not in _STEP_CORE}
        compiled: dict[str, Any] = {
            "id": str(item.get("step_id") or f"step{index + 1}"),
            "at": at,
            "action": action,
            "params": self._params(params),
        }
        output = item.get("output_variable")
        if output is not None:
            if not isinstance(output, str) or not re.fullmatch(r"[A-Za-z_]\w*", output):
                self.add(f"{where}.output_variable", f"{output!r} is not a variable name")
            else:
                compiled["output_variable"] = output
        for name in ("timeout_ms", "wait_ms", "wait_after_ms"):
            value = item.get(name)
            if value is None:
                continue
            limit = _MAX_TIMEOUT_MS if name == "timeout_ms" else 600_000
            if not isinstance(value, int) or not 0 <= value <= limit:
                self.add(f"{where}.{name}", f"{value!r} is not a time in ms of at most {limit}")
            else:
                compiled[name] = value
        if item.get("continue_on_error") is True:
            compiled["continue_on_error"] = True
        if action == "wait":
            self._check_wait(compiled["params"], where)
        return compiled

    def _check_wait(self, params: dict[str, Any], where: str) -> None:
        value = params.get("duration_ms", params.get("value"))
        if isinstance(value, int | float) and value > 600_000:
            self.add(
                f"{where}.duration_ms",
                f"a wait inside a step is at most 600000 ms, not {value}",
                "end the node here and start the next one from a langorch wait step, or "
                "shorten the wait",
            )

    def _params(self, params: dict[str, Any]) -> dict[str, Any]:
        from langorch.domain.kinds.sequence import EXPRESSION_PARAMS

        out: dict[str, Any] = {}
        for key, value in params.items():
            if key in EXPRESSION_PARAMS and isinstance(value, str):
                out[key] = self._condition(value)
            else:
                out[key] = self._templates(value)
        return out

    def _templates(self, value: Any) -> Any:
        if isinstance(value, str):
            return self._secrets(translate_template(value))
        if isinstance(value, dict):
            return {k: self._templates(v) for k, v in value.items()}
        if isinstance(value, list):
            return [self._templates(v) for v in value]
        return value

    def _secrets(self, template: str) -> str:
        """``secrets.NAME`` -> ``secrets["<secret id>"]`` inside ``{{ … }}``."""
        if "secrets." not in template:
            return template
        return _SECRET.sub(
            lambda m: f"secrets[{json.dumps(self.secret_refs.get(m.group(1), m.group(1)))}]",
            template,
        )

    def _condition(self, text: str) -> str:
        return translate_condition(text)

    def _checks(self, items: Any, path: str, field_name: str) -> list[dict[str, Any]]:
        if items is None:
            return []
        if not isinstance(items, list):
            self.add(f"{path}.{field_name}", f"{field_name} is a list of checks")
            return []
        checks = []
        for i, item in enumerate(items):
            where = f"{path}.{field_name}[{i}]"
            condition = item.get("condition") if isinstance(item, dict) else None
            if not isinstance(condition, str):
                self.add(f"{where}.condition", "a check needs a condition (an expression)")
                continue
            on_fail_raw = item.get("on_fail", item.get("on_failure", "fail_workflow"))
            check: dict[str, Any] = {
                "id": str(item.get("id") or f"check{i + 1}"),
                "at": f"{field_name}[{i}]",
                "condition": self._condition(condition),
                "message": translate_template(str(item.get("message") or "")),
            }
            on_fail = str(on_fail_raw)
            if on_fail in ("fail_workflow", "fail", "throw_exception", "retry_node"):
                check["on_fail"] = "fail"
            elif on_fail in ("warn", "continue"):
                check["on_fail"] = "warn"
            elif on_fail in self.nodes:
                check.update(on_fail="route", route_to=on_fail)
            elif on_fail == "route" and item.get("next_node") in self.nodes:
                check.update(on_fail="route", route_to=item["next_node"])
            else:
                self.add(
                    f"{where}.on_fail",
                    f"{on_fail!r} is neither fail_workflow, warn, continue nor a node id",
                    "fail the node (fail_workflow), note it (warn) or name the node to go to",
                )
                continue
            checks.append(check)
        return checks

    def _handlers(self, items: Any, path: str) -> list[dict[str, Any]]:
        if items is None:
            return []
        if not isinstance(items, list):
            self.add(f"{path}.error_handlers", "error_handlers is a list")
            return []
        handlers = []
        for i, item in enumerate(items):
            where = f"{path}.error_handlers[{i}]"
            if not isinstance(item, dict):
                self.add(where, "an error handler is a mapping")
                continue
            trigger = _dict(item.get("trigger"))
            handler: dict[str, Any] = {
                "at": f"error_handlers[{i}]",
                "error_type": str(item.get("error_type") or "*"),
                "ignore": item.get("action") == "ignore"
                or item.get("recovery_strategy") == "continue",
                "recovery_steps": self._actions(
                    item.get("recovery_steps"), where, "recovery_steps", required=False
                ),
            }
            if trigger and isinstance(trigger.get("error_text_contains"), str):
                handler["text_contains"] = trigger["error_text_contains"]
            handlers.append(handler)
        return handlers

    def _context_data(self, data: Any, path: str) -> tuple[list[str], list[str]]:
        """Keys an approver is shown: variable references become ``show_keys``; other values
        are described in the message."""
        if data is None:
            return [], []
        if not isinstance(data, dict):
            self.add(path, "context_data maps labels to values")
            return [], []
        shown: list[str] = []
        described: list[str] = []
        for label, value in data.items():
            variable = variable_of(value) if isinstance(value, str) else None
            if variable is not None:
                shown.append(variable)
            elif isinstance(value, str):
                described.append(f"{label}: {translate_template(value)}")
            else:
                described.append(f"{label}: {json.dumps(value, ensure_ascii=False)}")
        return list(dict.fromkeys(shown)), described

    def _extensions(self) -> None:
        """Apply each node's ``langorch`` field over the step compiled from it."""
        for node_id, ext in self.ext.items():
            step = self.steps[node_id]
            if "block_id" in ext or "kind" in ext:
                # A block step or another kind: what the node's type compiled to is replaced.
                for key in ("kind", "settings", "cases", "default_branch", "loop", "approval"):
                    step.pop(key, None)
            for key, value in ext.items():
                current = step.get(key)
                if isinstance(current, dict) and isinstance(value, dict) and key != "branches":
                    step[key] = {**current, **value}
                else:
                    step[key] = value

    # -- edges --------------------------------------------------------------------------------

    def _check_ref(self, path: str, target: Any, *, required: bool = False) -> bool:
        if target is None:
            if required:
                self.add(path, "a node id is required here")
            return False
        if not isinstance(target, str):
            self.add(path, f"expected a node id, got {type(target).__name__}")
            return False
        if target not in self.nodes:
            self._unknown_node(path, target)
            return False
        return True

    def _unknown_node(self, path: str, target: str) -> None:
        from difflib import get_close_matches

        close = get_close_matches(target, list(self.nodes), n=1)
        hint = f"did you mean {close[0]!r}?" if close else "name a node of workflow_graph.nodes"
        self.add(path, f"{target!r} is not a node of this procedure", hint)

    def _successors(self, node_id: str) -> Iterator[str]:
        """Where control may go from a node (for reachability and loop bodies)."""
        node = self.nodes.get(node_id)
        if not isinstance(node, dict):
            return
        kind = node.get("type")
        targets: list[Any] = [node.get("next_node")]
        if kind == "logic":
            rules = _list(node.get("rules"))
            targets += [r.get("next_node") for r in rules if isinstance(r, dict)]
            targets.append(node.get("default_next_node"))
        elif kind == "loop":
            targets.append(node.get("body_node"))
        elif kind == "parallel":
            targets += self._branch_starts(node)
        elif kind == "human_approval":
            targets += [node.get(k) for k in ("on_approve", "on_reject", "on_timeout")]
        elif kind == "verification":
            step = self.steps.get(node_id) or {}
            targets += list((step.get("branches") or {}).values())
        handlers = node.get("error_handlers")
        for handler in handlers if isinstance(handlers, list) else []:
            if isinstance(handler, dict):
                targets.append(handler.get("fallback_node"))
        ext = _dict(node.get(EXTENSION))
        targets += list(_dict(ext.get("branches")).values())
        targets += [ext.get("on_error"), _dict(ext.get("approval")).get("on_max_iterations")]
        for target in targets:
            if isinstance(target, str) and target in self.nodes:
                yield target

    def _branch_starts(self, node: dict[str, Any]) -> list[str]:
        branches = _list(node.get("branches"))
        starts = []
        for branch in branches:
            start = branch.get("start_node") if isinstance(branch, dict) else branch
            if isinstance(start, str):
                starts.append(start)
        return starts

    def _reachability(self, start: str, on_failure: str | None) -> None:
        seen: set[str] = set()
        queue = deque([start] + ([on_failure] if on_failure in self.nodes else []))
        while queue:
            node_id = queue.popleft()
            if node_id in seen:
                continue
            seen.add(node_id)
            queue.extend(self._successors(node_id))
        for node_id in self.nodes:
            if node_id not in seen:
                self.add(
                    node_path(node_id),
                    f"node {node_id!r} can never run: no path leads to it from {start!r}",
                    "name it in a next_node, rule, branch or handler of another node, or remove it",
                )

    def _loop_body(self, loop_id: str, node: dict[str, Any]) -> set[str]:
        """The nodes from ``body_node`` until control returns to the loop (or the body ends)."""
        body_start = node.get("body_node")
        after = node.get("next_node")
        body: set[str] = set()
        queue = deque([body_start] if isinstance(body_start, str) else [])
        while queue:
            node_id = queue.popleft()
            if node_id in body or node_id in (loop_id, after) or node_id not in self.nodes:
                continue
            body.add(node_id)
            queue.extend(self._successors(node_id))
        return body

    def _wire(self) -> None:
        """``depends_on``, branches and joins from the nodes' transitions."""
        incoming: dict[str, list[str]] = {}
        loops: dict[str, set[str]] = {}
        for node_id, node in self.nodes.items():
            if isinstance(node, dict) and node.get("type") == "loop" and node_id in self.steps:
                loops[node_id] = self._loop_body(node_id, node)
        body_of = {member: loop for loop, body in loops.items() for member in body}
        for node_id, node in self.nodes.items():
            if not isinstance(node, dict) or node_id not in self.steps:
                continue
            path = node_path(node_id)
            kind = node.get("type")
            source = self.exit_of[node_id]
            nxt = node.get("next_node")
            if kind in ("logic", "human_approval", "verification"):
                self._branch_routes(node_id, node, path, nxt)
                continue
            if "branches" in _dict(node.get(EXTENSION)):
                continue  # a block decision (written by export --ckp): it routes by label
            if kind == "parallel":
                starts = self._branch_starts(node)
                for i, start in enumerate(starts):
                    if self._check_ref(f"{path}.branches[{i}].start_node", start):
                        incoming.setdefault(start, []).append(source)
                if nxt is not None and self._check_ref(f"{path}.next_node", nxt):
                    tails = [t for s in starts if s in self.nodes for t in self._tails(s, nxt)]
                    self.steps[self.entry_of[nxt]]["join"] = "all"
                    incoming.setdefault(nxt, []).extend(tails)
                continue
            if kind == "terminate":
                if nxt is not None:
                    self.warn(f"{path}.next_node", "a terminate node ends the run: ignored")
                continue
            if nxt is None:
                continue
            if not self._check_ref(f"{path}.next_node", nxt):
                continue
            if body_of.get(node_id) == nxt:
                continue  # back to its loop: the end of an iteration
            if node_id in body_of and nxt not in loops.get(body_of[node_id], set()):
                self.add(
                    f"{path}.next_node",
                    f"{nxt!r} is outside loop {body_of[node_id]!r}, whose body {node_id!r} is in",
                    f"end the body with next_node: {body_of[node_id]!r} (or none) and continue "
                    "from the loop's next_node",
                )
                continue
            incoming.setdefault(nxt, []).append(source)
        for target, sources in incoming.items():
            step = self.steps.get(self.entry_of.get(target, target))
            if step is None:
                continue
            step["depends_on"] = list(dict.fromkeys([*step.get("depends_on", []), *sources]))
            if len(step["depends_on"]) > 1:
                # Outside parallel joins, paths into a node are exclusive (branches of a logic
                # node, an approval, a verification): whichever arrives runs it.
                step.setdefault("join", "any")
        for loop_id, body in loops.items():
            node = self.nodes[loop_id]
            self.steps[loop_id]["loop"]["body"] = [n for n in self.nodes if n in body] + [
                s for n in self.nodes if n in body for s in self._tails_of_generated(n)
            ]
            if node.get("continue_on_error") is True:
                for member in body:
                    step = self.steps[self.entry_of[member]]
                    if "on_error" not in step:
                        step["on_error"] = loop_id
                        # The error route back to the loop starts the next item: a cycle the
                        # loop itself bounds. The step's own bound (the field's largest) says
                        # the cycle is meant, without cutting the loop's iterations short.
                        step.setdefault("max_iterations", _UNBOUNDED)

    def _tails_of_generated(self, node_id: str) -> list[str]:
        """Generated steps that belong with a node (a terminate's end, a subflow's renames)."""
        return [s for s in self.steps if s.startswith(node_id + "__")]

    def _branch_routes(self, node_id: str, node: dict[str, Any], path: str, nxt: Any) -> None:
        step = self.steps[node_id]
        if node.get("type") == "logic":
            labels = {case["branch"] for case in step.get("cases", [])}
            if "default_branch" in step:
                labels.add(step["default_branch"])
            step["branches"] = {label: self.entry_of[label] for label in sorted(labels)}
            if nxt is not None:
                self.warn(f"{path}.next_node", "a logic node routes by its rules: ignored")
            return
        if node.get("type") == "verification":
            if nxt is not None and self._check_ref(f"{path}.next_node", nxt):
                step["branches"][PASSED] = nxt
            step["branches"] = {k: self.entry_of[v] for k, v in step["branches"].items()}
            return
        step["branches"] = {k: self.entry_of[v] for k, v in step.get("branches", {}).items()}
        if nxt is not None:
            self.warn(
                f"{path}.next_node",
                "a human_approval routes by on_approve / on_reject / on_timeout: ignored",
            )

    def _tails(self, start: str, join: str) -> list[str]:
        """The last steps of a parallel branch: nodes from ``start`` whose next is ``join`` or
        nothing."""
        tails: list[str] = []
        seen: set[str] = set()
        queue = deque([start])
        while queue:
            node_id = queue.popleft()
            if node_id in seen or node_id == join or node_id not in self.nodes:
                continue
            seen.add(node_id)
            nxt = self.nodes[node_id].get("next_node")
            if nxt in (None, join):
                tails.append(self.exit_of.get(node_id, node_id))
            else:
                queue.append(nxt)
        return tails

    # -- triggers and variables ---------------------------------------------------------------

    def _triggers(self) -> list[dict[str, Any]]:
        trigger = self.doc.get("trigger")
        if trigger is None:
            return []
        if not isinstance(trigger, dict):
            self.add("trigger", "a trigger is a mapping with a type")
            return []
        kind = trigger.get("type", "manual")
        if kind not in TRIGGER_TYPES:
            self.add(
                "trigger.type", f"{kind!r} is not a trigger type", f"use one of {TRIGGER_TYPES}"
            )
            return []
        if kind == "event":
            return [self._event(trigger)]
        if kind == "manual":
            return [{"type": "manual"}]
        if kind == "webhook":
            return [{"type": "webhook"}]
        if kind == "scheduled":
            cron = trigger.get("schedule") or trigger.get("cron")
            if not isinstance(cron, str):
                self.add("trigger.schedule", "a scheduled trigger needs schedule: '<cron>'")
                return []
            schedule = {"cron_expression": cron, "timezone": str(trigger.get("timezone") or "UTC")}
            return [{"type": "schedule", "schedule": schedule}]
        return [self._file_watch(trigger)]

    def _event(self, trigger: dict[str, Any]) -> dict[str, Any]:
        """``event_config: {bus, pattern}``: an EventBridge event trigger (the pattern is
        checked with the compiled workflow, at ``triggers[0].pattern``)."""
        config = trigger.get("event_config")
        if not isinstance(config, dict) or not isinstance(config.get("pattern"), dict):
            self.add(
                "trigger.event_config.pattern",
                "an event trigger needs event_config.pattern: an EventBridge event pattern",
                'e.g. event_config: {bus: default, pattern: {source: ["shop.orders"]}}',
            )
            return {"type": "event", "pattern": {}}
        compiled: dict[str, Any] = {"type": "event", "pattern": config["pattern"]}
        if config.get("bus") is not None:
            compiled["bus"] = str(config["bus"])
        return compiled

    def _file_watch(self, trigger: dict[str, Any]) -> dict[str, Any]:
        config = trigger.get("file_watch_config")
        config = config if isinstance(config, dict) else {}
        prefix = str(config.get("path") or "")
        pattern = str(config.get("pattern") or "*")
        if prefix and not prefix.endswith("/"):
            prefix += "/"
        head, star, suffix = pattern.partition("*")
        if not star or any(c in suffix for c in "*?["):
            self.add(
                "trigger.file_watch_config.pattern",
                f"{pattern!r} cannot be watched: a pattern is <prefix>*<suffix>",
                "e.g. invoices/*.csv",
            )
        events = config.get("event_types")
        if isinstance(events, list) and set(events) - {"created"}:
            self.warn(
                "trigger.file_watch_config.event_types",
                "only created files start runs (S3 object created)",
                "remove modified and deleted",
            )
        watched = prefix + head.lstrip("/")
        if not watched and not suffix:
            self.add(
                "trigger.file_watch_config",
                "a file_watch trigger watching every file would also see langorch's own",
                "give a path or a pattern such as inbox/*.csv",
            )
        return {"type": "s3", "prefix": watched, "suffix": suffix}

    def _variables(self) -> dict[str, Any] | None:
        schema = self.doc.get("variables_schema")
        if schema is None:
            return None
        if not isinstance(schema, dict):
            self.add("variables_schema", "variables_schema has required and optional variables")
            return None
        properties: dict[str, dict[str, Any]] = {}
        required: list[str] = []
        for group in ("required", "optional"):
            variables = schema.get(group) or {}
            if not isinstance(variables, dict):
                self.add(f"variables_schema.{group}", "maps variable names to their types")
                continue
            for name, spec in variables.items():
                where = f"variables_schema.{group}.{name}"
                prop = self._variable(spec, where)
                if prop is None:
                    continue
                properties[str(name)] = prop
                if group == "required" and "default" not in prop:
                    required.append(str(name))
        for key in schema:
            if key not in ("required", "optional"):
                self.warn(f"variables_schema.{key}", f"unknown field {key!r} is ignored")
        return {"properties": properties, "required": required}

    def _variable(self, spec: Any, where: str) -> dict[str, Any] | None:
        if not isinstance(spec, dict):
            self.add(where, "a variable is {type: …, description: …}")
            return None
        # JSON Schema keywords an author (or export --ckp) wrote pass through: items, format…
        prop: dict[str, Any] = {
            k: v for k, v in spec.items() if k not in ("origin", "validation", "sensitive")
        }
        kind = spec.get("type")
        if kind is not None and kind not in _TYPES:
            self.add(f"{where}.type", f"{kind!r} is not a variable type", f"use one of {_TYPES}")
        validation = _dict(spec.get("validation"))
        for source, target in (
            ("regex", "pattern"),
            ("min", "minimum"),
            ("max", "maximum"),
            ("allowed_values", "enum"),
        ):
            if source in validation:
                prop[target] = validation[source]
        if "pattern" in prop:
            try:
                re.compile(str(prop["pattern"]))
            except re.error as exc:
                self.add(f"{where}.validation.regex", f"not a regular expression: {exc}")
        return prop


def sensitive_variables(document: dict[str, Any]) -> frozenset[str]:
    """The variables ``variables_schema`` marks sensitive (``sensitive: true`` on the variable
    or in its ``validation``)."""
    schema = document.get("variables_schema")
    names: set[str] = set()
    if not isinstance(schema, dict):
        return frozenset()
    for group in ("required", "optional"):
        variables = schema.get(group)
        for name, spec in (variables or {}).items() if isinstance(variables, dict) else []:
            if not isinstance(spec, dict):
                continue
            validation = _dict(spec.get("validation"))
            if spec.get("sensitive") is True or validation.get("sensitive") is True:
                names.add(str(name))
    return frozenset(names)


def _set(at: str, variable: str, value: Any) -> dict[str, Any]:
    """A generated ``set_variable`` step."""
    return {
        "id": at,
        "at": at,
        "action": "set_variable",
        "params": {"variable": variable, "value": value},
        "output_variable": variable,
    }


def _translated(step: dict[str, Any]) -> dict[str, Any]:
    """A generated step with the templates of its value rewritten."""
    params = dict(step["params"])
    params["value"] = _translate_value(params.get("value"))
    return {**step, "params": params}


def _translate_value(value: Any) -> Any:
    if isinstance(value, str):
        return translate_template(value)
    if isinstance(value, dict):
        return {k: _translate_value(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_translate_value(v) for v in value]
    return value


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _pruned(settings: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in settings.items() if v not in ([], None, {})}


def _title(node: dict[str, Any]) -> str:
    title = node.get("title") or node.get("description") or ""
    return str(title)[:200]


def _strings(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, list):
        return [str(v) for v in value if isinstance(v, str)]
    return []


def _intent(doc: dict[str, Any]) -> str:
    meta = doc.get("retrieval_metadata")
    intents = meta.get("primary_intents") or meta.get("intents") if isinstance(meta, dict) else None
    return "; ".join(_strings(intents))


def _domain(doc: dict[str, Any]) -> str:
    meta = doc.get("retrieval_metadata")
    if not isinstance(meta, dict):
        return ""
    return str(meta.get("business_domain") or meta.get("domain") or "")


def _keywords(doc: dict[str, Any]) -> list[str]:
    meta = doc.get("retrieval_metadata")
    return _strings(meta.get("keywords")) if isinstance(meta, dict) else []
