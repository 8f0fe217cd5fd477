"""Imported by ``langorch dev``'s fork server before it forks sandboxes: work every sandbox's
first invocation would otherwise repeat (measured per cold sandbox: run_segment 0.43-0.50 s of
CPU, trigger 0.33-0.39 s, against 35-45 ms warm).

* botocore's models and endpoint rules of the services the functions call, parsed into the
  process's shared data loader (:func:`langorch.adapters.aws.warm_clients`);
* ``jsonschema``, which the trigger imports on its first input validation;
* the adapters a handler's container imports when it first uses them (a burst of cold
  sandboxes spent ~14 ms each importing them: 0.9 s of CPU in the first round of
  ``make bench-pipeline``), and what the handlers import on their first segment, page or
  secret (another ~1.3 s there), kept off their import path for Lambda's cold start (P3);
* the approval pages' and emails' templates, compiled (~0.4 s there).

Lambda has no fork server: there each execution environment pays this once, in its init phase.
"""

from __future__ import annotations

from importlib import import_module

import jsonschema  # noqa: F401 - imported for its side effect: loaded once, before the fork

from langorch.adapters.aws import warm_clients

SERVICES = ("stepfunctions",)
"""What the local functions' container builds clients for (the rest is the local store)."""

warm_clients(SERVICES)

ADAPTERS = (
    "langorch.adapters.emulator_stepfunctions",
    "langorch.adapters.local_files",
    "langorch.adapters.outbox",
    "langorch.adapters.scheduler",
    "langorch.adapters.sqlite.approvals",
    "langorch.adapters.sqlite.checkpointer",
    "langorch.adapters.sqlite.definitions",
    "langorch.adapters.sqlite.memory",
    "langorch.adapters.sqlite.resources",
    "langorch.adapters.sqlite.runs",
    "langorch.adapters.sqlite.schedules",
    "langorch.adapters.sqlite.secrets",
    "langorch.adapters.sqlite.tasks",
    "langorch.adapters.sqlite.tool_servers",
    "langorch.composition.embedded",
)
"""What the embedded container's properties import on first use (the functions' containers)."""

FIRST_USE = (
    "aws_lambda_powertools.utilities.parameters",
    "langorch.app.resources",
    "langorch.app.step_tools",
    "langorch.domain.plan.topology",
    "langorch.engine.context",
    "langorch.local.logs",
    "langorch.web.emails",
    "langorch.web.pages",
)
"""What the handlers import on first use: a segment's engine context and topology, a secret,
an approval page or email, the sandbox's log capture."""

for _module in (*ADAPTERS, *FIRST_USE):
    import_module(_module)
import_module("langorch.web.pages").compile_templates()
import_module("langorch.web.emails").compile_templates()
