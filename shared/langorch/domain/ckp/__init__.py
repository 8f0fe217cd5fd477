"""CKP — seed 001's Canonical Knowledge Procedure — as a first-class way into langorch.

A CKP procedure (``procedure_id``, ``workflow_graph`` of typed nodes, ``variables_schema``,
``trigger``, ``global_config``) is compiled into the plan the one engine runs
(:mod:`.compiler`); its templates and conditions are rewritten for the sandboxed evaluator
(:mod:`.expressions`); each step's action is bound to a built-in action, a registered agent or an
MCP tool (:mod:`.actions`, :mod:`.binding`); a stored workflow is written back as CKP by
:mod:`.export`; whether a version may run from a trigger is :mod:`.lifecycle`'s rule.
"""
