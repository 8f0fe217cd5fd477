"""CKP — seed 001's Canonical Knowledge Procedure — as a first-class way into langorch.

A CKP procedure (``procedure_id``, ``workflow_graph`` of typed nodes, ``variables_schema``,
``trigger``, ``global_config``) is compiled into the plan the one engine runs
(:mod:`.compiler`); its templates and conditions are rewritten for the sandboxed evaluator
(:mod:`.expressions`); each step's action is bound to a built-in action, a registered agent or an
MCP tool (:mod:`.actions`, :mod:`.binding`); a stored workflow is written back as CKP by
:mod:`.export`; whether a version may run from a trigger is :mod:`.lifecycle`'s rule.
"""

from __future__ import annotations

from typing import Any


def is_procedure(data: Any) -> bool:
    """Whether a parsed document is a CKP procedure rather than a block or a workflow.

    Here, not in :mod:`.compiler`: loading asks it of every document, and imports the compiler
    only for a procedure (issue 26: ``workflows validate`` of a plain workflow in 0.3 s).
    """
    return isinstance(data, dict) and ("procedure_id" in data or "workflow_graph" in data)
