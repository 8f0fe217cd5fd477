"""Any stored workflow written as a CKP procedure (``langorch workflows export --ckp``).

A procedure stored from CKP is written back as its author wrote it. A workflow written in
langorch's own format (seed 000's blocks and plans) becomes a procedure whose nodes are its steps:

==============================  =============================================================
step                            node
==============================  =============================================================
a block (LLM action, extraction, LLM decision)   ``llm_action`` showing the block's prompt,
                                                 the block named under ``langorch``
decision by cases or condition  ``logic`` (rules in order, ``default_next_node``)
approval                        ``human_approval`` (``on_approve``/``on_reject``/``on_timeout``)
loop                            ``loop`` (its body chained with ``next_node``)
transform                       ``transform`` (one ``map`` per key)
http, read_file, wait           ``sequence`` with the built-in action
subflow, terminate              ``subflow``, ``terminate``
sequence, verification, …       the node type they came from
==============================  =============================================================

What CKP has no words for — a block reference, an approval's quorum or reminders, a loop's
collected keys, a step's memory settings — goes under a ``langorch`` field of the node (or of the
procedure), which the CKP compiler reads back: export then import gives the same plan, so runs
take the same steps with the same outputs. Steps with several successors fork through a
``parallel`` node named ``<step>_parallel`` (its ``next_node`` is their join, when they join).
"""

from __future__ import annotations

import json
from typing import Any

from langorch.domain.definitions import PlanStep, TaskPlan, Trigger
from langorch.domain.errors import DefinitionError, Problem
from langorch.domain.lookup import DefinitionLookup
from langorch.domain.plan.graph import StepGraph
from langorch.domain.plan.topology import step_graph

EXTENSION = "langorch"
"""The field of a node (or of the procedure) that holds what CKP cannot say."""

_APPROVAL_CKP = frozenset(
    {"approvers", "title", "message", "timeout_seconds", "on_timeout", "show_keys", "escalation"}
)
_TIMEOUT_ACTIONS = {"approve": "auto_approve", "reject": "auto_reject", "branch": "escalate"}


def export_ckp(plan: TaskPlan, lookup: DefinitionLookup) -> dict[str, Any]:
    """The workflow as a CKP procedure.

    Args:
        plan: A stored workflow version.
        lookup: Where its blocks are found (for their prompts, shown in ``llm_action`` nodes).

    Returns:
        The procedure document.

    Raises:
        DefinitionError: the workflow cannot be written as CKP (each step and why).
    """
    if plan.ckp is not None:
        document: dict[str, Any] = json.loads(plan.ckp)
        return document
    return _Exporter(plan, lookup).document()


class _Exporter:
    def __init__(self, plan: TaskPlan, lookup: DefinitionLookup) -> None:
        self.plan = plan
        self.lookup = lookup
        self.graph: StepGraph = step_graph(plan, lookup)
        self.problems: list[Problem] = []
        self.nodes: dict[str, dict[str, Any]] = {}

    def document(self) -> dict[str, Any]:
        plan = self.plan
        for index, step in enumerate(plan.steps):
            node = self._node(step, f"steps[{index}]")
            self.nodes[step.step_id] = node
        self._wire()
        if self.problems:
            raise DefinitionError(f"workflow {plan.plan_id} as CKP", self.problems)
        entry = list(self.graph.entry)
        start = entry[0] if len(entry) == 1 else self._fork("start", entry)
        document: dict[str, Any] = {
            "procedure_id": plan.plan_id,
            "version": str(plan.version),
            "status": "active",
            "description": plan.description,
        }
        if plan.name:
            document["title"] = plan.name
        trigger = self._trigger()
        if trigger is not None:
            document["trigger"] = trigger
        meta: dict[str, Any] = {}
        if plan.user_intent:
            meta["primary_intents"] = [plan.user_intent]
        if plan.category:
            meta["business_domain"] = plan.category
        if plan.tags:
            meta["keywords"] = list(plan.tags)
        if meta:
            document["retrieval_metadata"] = meta
        if plan.on_failure:
            document["global_config"] = {"on_failure": plan.on_failure}
        if plan.approvers:
            document["approvers"] = list(plan.approvers)
        variables = self._variables()
        if variables is not None:
            document["variables_schema"] = variables
        document["workflow_graph"] = {"start_node": start, "nodes": self.nodes}
        extra: dict[str, Any] = {
            key: value
            for key, value in (
                ("memory", plan.memory),
                ("llm_provider", plan.llm_provider),
                ("llm_model", plan.llm_model),
                ("llm_temperature", plan.llm_temperature),
                ("llm_max_tokens", plan.llm_max_tokens),
                ("created_by", plan.created_by if plan.created_by != "system" else None),
            )
            if value not in (None, False)
        }
        if plan.entry_step_id is None and len(entry) == 1:
            extra["entry_step_id"] = None  # as written: the topology finds the first step
        if [t.model_dump() for t in plan.triggers] != [
            t.model_dump() for t in _triggers_of(trigger)
        ]:
            extra["triggers"] = [
                t.model_dump(mode="json", exclude_defaults=True) for t in plan.triggers
            ]
        if plan.schedule is not None:
            extra["schedule"] = plan.schedule.model_dump(mode="json")
        if extra:
            document[EXTENSION] = extra
        return document

    # -- nodes --------------------------------------------------------------------------------

    def _node(self, step: PlanStep, path: str) -> dict[str, Any]:
        kind = str(self.graph.steps[step.step_id].kind or "action")
        node: dict[str, Any] = {}
        extra: dict[str, Any] = {}
        if step.name:
            node["title"] = step.name
        if step.block_id is not None:
            self._block_node(step, node, extra)
        elif kind in ("sequence", "verification", "llm_action"):
            node["type"] = kind
            extra["settings"] = step.settings
        else:
            handler = getattr(self, f"_{kind}", None)
            if handler is None:
                # No CKP node type says this (memory, http, read_file, wait, a plugin's kind):
                # a node that does nothing in CKP's words, the step itself under langorch.
                node["type"] = "sequence"
                node["steps"] = []
                extra.update(_as_written(step))
            else:
                handler(step, node, extra)
        if step.name != node.get("title", ""):
            extra["name"] = step.name
        self._policies(step, node, extra)
        if extra:
            node[EXTENSION] = extra
        return node

    def _block_node(self, step: PlanStep, node: dict[str, Any], extra: dict[str, Any]) -> None:
        """An LLM step of a block: its prompt shown, the step itself under ``langorch``."""
        block = self.lookup.get_block(step.block_id or "", step.block_version)
        node["type"] = "llm_action"
        node["prompt"] = block.prompt_template if block is not None else str(step.block_id)
        extra.update(_as_written(step))

    def _decision(self, step: PlanStep, node: dict[str, Any], extra: dict[str, Any]) -> None:
        labels = self.graph.branch_targets(step.step_id)
        node["type"] = "logic"
        if step.cases:
            node["rules"] = [
                {"condition": case.when, "next_node": labels[case.branch]} for case in step.cases
            ]
        elif step.condition:
            condition = step.condition.strip()
            inner = condition[2:-2].strip() if condition.startswith("{{") else condition
            node["rules"] = [
                {"condition": f"({inner}) == {json.dumps(label)}", "next_node": target}
                for label, target in labels.items()
            ]
        if step.default_branch is not None:
            node["default_next_node"] = labels[step.default_branch]
        if step.condition:
            extra.update(condition=step.condition, cases=None)
        if any(label != target for label, target in labels.items()):
            # The labels are the step's own words (<step>_branch records them): kept.
            extra["branches"] = dict(labels)
            extra["cases"] = [c.model_dump() for c in step.cases or []]
            if step.condition:
                extra["condition"] = step.condition
            if step.default_branch is not None:
                extra["default_branch"] = step.default_branch

    def _approval(self, step: PlanStep, node: dict[str, Any], extra: dict[str, Any]) -> None:
        spec = step.approval
        node["type"] = "human_approval"
        node["decision_type"] = "approve_reject"
        labels = self.graph.branch_targets(step.step_id)
        for label, field_name in (
            ("approved", "on_approve"),
            ("rejected", "on_reject"),
            ("timed_out", "on_timeout"),
        ):
            if label in labels:
                node[field_name] = labels[label]
        if spec is None:
            return
        if spec.approvers:
            node["approvers"] = list(spec.approvers)
        node["title"] = spec.title or node.get("title", step.step_id)
        node["prompt"] = spec.message
        node["timeout_ms"] = spec.timeout_seconds * 1000
        if spec.on_timeout in _TIMEOUT_ACTIONS:
            node["timeout_action"] = _TIMEOUT_ACTIONS[spec.on_timeout]
        if spec.show_keys:
            node["context_data"] = {key: "{{ " + key + " }}" for key in spec.show_keys}
        if spec.editable_keys:
            node["editable_fields"] = list(spec.editable_keys)
        # The rest of the step's approval (policy, review loop, code) as langorch writes it.
        rest = {
            k: v
            for k, v in spec.model_dump(mode="json", exclude_defaults=True).items()
            if k not in _APPROVAL_CKP and k != "editable_keys"
        }
        exact = {"approval": spec.model_dump(mode="json", exclude_defaults=True)}
        if rest or spec.on_timeout == "fail" or spec.escalation:
            extra.update(exact)
        if spec.title == "":
            extra.setdefault("approval", {})["title"] = ""

    def _loop(self, step: PlanStep, node: dict[str, Any], extra: dict[str, Any]) -> None:
        loop = step.loop
        info = self.graph.loops.get(step.step_id)
        node["type"] = "loop"
        if loop is None or info is None:
            return
        node["iterator"] = loop.over
        node["iterator_variable"] = loop.item_key
        node["index_variable"] = loop.index_key
        node["max_iterations"] = loop.max_iterations
        if loop.collect_key:
            node["collect_variable"] = loop.collect_key
        if len(info.entries) != 1:
            self.problems.append(
                Problem(
                    f"steps[{self.graph.steps[step.step_id].index}].loop.body",
                    f"loop {step.step_id!r} starts {len(info.entries)} body steps at once; a CKP "
                    "loop has one body_node",
                    "start the body with one step the others depend on",
                )
            )
            return
        node["body_node"] = info.entries[0]
        extra["loop"] = loop.model_dump(mode="json", exclude_defaults=True)

    def _transform(self, step: PlanStep, node: dict[str, Any], extra: dict[str, Any]) -> None:
        node["type"] = "transform"
        extra["kind"] = "transform"
        node["transformations"] = [
            {"type": "map", "expression": expression, "output_variable": key}
            for key, expression in (step.transform or {}).items()
        ]
        extra["transform"] = dict(step.transform or {})

    def _subflow(self, step: PlanStep, node: dict[str, Any], extra: dict[str, Any]) -> None:
        spec = step.subflow
        node["type"] = "subflow"
        if spec is None:
            return
        node["procedure_id"] = spec.workflow_id
        if spec.version is not None:
            node["version"] = spec.version
        node["input_mapping"] = dict(spec.inputs)
        node["output_mapping"] = {key: key for key in spec.outputs}
        if not spec.outputs:
            extra["subflow"] = spec.model_dump(mode="json")

    def _terminate(self, step: PlanStep, node: dict[str, Any], extra: dict[str, Any]) -> None:
        spec = step.terminate
        node["type"] = "terminate"
        node["status"] = "failed" if spec is not None and spec.status == "failed" else "success"
        if spec is not None and spec.outputs:
            # A bare name reads that variable; CKP says so with braces.
            node["outputs"] = {
                name: source if "{" in source else "{{ " + source + " }}"
                for name, source in spec.outputs.items()
            }
        if spec is not None and spec.message:
            node["message"] = spec.message

    def _policies(self, step: PlanStep, node: dict[str, Any], extra: dict[str, Any]) -> None:
        if step.on_error is not None:
            node["error_handlers"] = [
                {"error_type": "*", "action": "fail", "fallback_node": step.on_error}
            ]
        for name in ("max_retries", "timeout_seconds", "resource", "join"):
            value = getattr(step, name)
            if value is not None:
                extra[name] = value
        if step.retry_backoff_seconds != PlanStep.model_fields["retry_backoff_seconds"].default:
            extra["retry_backoff_seconds"] = step.retry_backoff_seconds
        if step.max_iterations is not None:
            extra["max_iterations"] = step.max_iterations
        if len(self.graph.predecessors(step.step_id, "next", "branch", "loop_done")) > 1:
            extra["join"] = step.join  # as written (unset: the topology decides)

    # -- edges --------------------------------------------------------------------------------

    def _wire(self) -> None:
        graph = self.graph
        for sid in list(self.nodes):
            if sid not in graph.steps:
                continue
            node = self.nodes[sid]
            if node.get("type") in ("logic", "human_approval") or (
                EXTENSION in node and ("branches" in node[EXTENSION])
            ):
                continue
            loop = graph.steps[sid].loop
            if sid in graph.loops:
                nexts = [e.target for e in graph.successors(sid, "loop_done")]
            else:
                nexts = [e.target for e in graph.successors(sid, "next")]
                if not nexts and loop is not None and graph.successors(sid, "loop_back"):
                    nexts = [loop]  # the body's last step returns to its loop
            if len(nexts) == 1:
                node["next_node"] = nexts[0]
            elif len(nexts) > 1:
                node["next_node"] = self._fork(sid, nexts)

    def _fork(self, sid: str, targets: list[str]) -> str:
        """A ``parallel`` node starting ``targets``; its next is the step joining them all."""
        name = f"{sid}_parallel"
        node: dict[str, Any] = {
            "type": "parallel",
            "branches": [{"branch_id": t, "start_node": t} for t in targets],
            "wait_strategy": "all",
        }
        join = self._join_of(targets)
        if join is not None:
            node["next_node"] = join
            for edge in self.graph.predecessors(join, "next"):
                self.nodes.get(edge.source, {}).pop("next_node", None)
        self.nodes[name] = node
        return name

    def _join_of(self, targets: list[str]) -> str | None:
        for sid, step in self.graph.steps.items():
            incoming = self.graph.predecessors(sid, "next")
            if step.join == "all" and len(incoming) > 1:
                sources = {e.source for e in incoming}
                if sources & set(targets) or any(s in self._downstream(targets) for s in sources):
                    return sid
        return None

    def _downstream(self, targets: list[str]) -> set[str]:
        from langorch.domain.plan.graph import FORWARD, reach

        out: dict[str, list[Any]] = {
            sid: list(self.graph.successors(sid)) for sid in self.graph.steps
        }
        return reach(targets, out, FORWARD)

    # -- procedure-level ----------------------------------------------------------------------

    def _trigger(self) -> dict[str, Any] | None:
        # CKP has one trigger: the first that is not manual (a workflow can always be started
        # by hand); all of them go under langorch when there are more.
        triggers = [t for t in self.plan.all_triggers() if t.type != "manual"]
        if not triggers:
            return {"type": "manual"}
        trigger = triggers[0]
        if trigger.type == "schedule" and trigger.schedule is not None:
            return {
                "type": "scheduled",
                "schedule": trigger.schedule.cron_expression,
                "timezone": trigger.schedule.timezone,
            }
        if trigger.type == "s3":
            return {
                "type": "file_watch",
                "file_watch_config": {
                    "path": trigger.prefix.rsplit("/", 1)[0] if "/" in trigger.prefix else "",
                    "pattern": (
                        trigger.prefix.rsplit("/", 1)[-1]
                        if "/" in trigger.prefix
                        else trigger.prefix
                    )
                    + "*"
                    + trigger.suffix,
                },
            }
        if trigger.type == "event":
            config: dict[str, Any] = {"pattern": trigger.pattern}
            if trigger.bus:
                config["bus"] = trigger.bus
            return {"type": "event", "event_config": config}
        return {"type": trigger.type}

    def _variables(self) -> dict[str, Any] | None:
        schema = self.plan.inputs_schema
        if schema is None:
            return None
        required: dict[str, Any] = {}
        optional: dict[str, Any] = {}
        for name, prop in schema.properties.items():
            variable: dict[str, Any] = {}
            validation: dict[str, Any] = {}
            for key, value in prop.items():
                target = {
                    "pattern": "regex",
                    "minimum": "min",
                    "maximum": "max",
                    "enum": "allowed_values",
                }
                if key in target:
                    validation[target[key]] = value
                else:
                    variable[key] = value
            if validation:
                variable["validation"] = validation
            (required if name in schema.required else optional)[name] = variable
        return {"required": required, "optional": optional}


def _triggers_of(trigger: dict[str, Any] | None) -> list[Trigger]:
    """What the CKP compiler makes of a procedure's trigger."""
    from langorch.domain.ckp.compiler import compile_procedure

    if trigger is None:
        return []
    probe = {
        "procedure_id": "probe",
        "trigger": trigger,
        "workflow_graph": {"start_node": "end", "nodes": {"end": {"type": "terminate"}}},
    }
    return list(compile_procedure(probe).plan.triggers)


def _as_written(step: PlanStep) -> dict[str, Any]:
    """A step's own fields (not its id, name, wiring or error route: the node says those)."""
    return step.model_dump(
        mode="json",
        exclude_defaults=True,
        exclude={"step_id", "depends_on", "name", "on_error", "retry_backoff_seconds"},
    )
