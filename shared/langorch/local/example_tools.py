"""``langorch dev`` and ``runs start --local``: start the examples' servers and register them.

An example folder may ship MCP tool servers and a ``tools.yaml`` naming them::

    tools:
      - name: orders               # the name blocks list in tools_required
        server: mcp_server.py      # a module beside tools.yaml with serve(token) -> .url, .stop()
        allow: [lookup_order]      # optional: the tools a model may call
        description: ...
        policies: [...]            # optional: the server's tool-call rules (tools add --policies)
        cost: 0.01                 # optional: US dollars a call (tools add --cost)
        tool_costs: {refund: 0.25} # optional: a tool's own (tools add --tool-cost)

and stand-in agents for its CKP procedures with an ``agents.yaml``::

    server: agents.py              # one module serving every agent: serve(token, secrets)
    secrets: [langorch/erp]        # optional: created with a random value, given to serve()
    agents:
      - name: DESKTOP              # what the procedure's nodes say in "agent"
        path: /desktop             # the agent's endpoint under the server's URL
        actions: [launch_app, type, click]
        mode: batch                # step | batch | node
        resource_key: desktop:vm-01:session-1   # optional, with limit
        limit: 1

Each server starts in this process on a free loopback port with a fresh bearer token; the
token goes to the local secrets store (``langorch/tools/<name>`` for a tool,
``langorch/agents/<example>`` for an example's agents; ``{"value": "Bearer …"}``) and each
server or agent is registered with ``--header Authorization=secret:<that id>``, as an operator
would with ``langorch tools add`` / ``langorch agents add``. The token is never printed.
"""

from __future__ import annotations

import importlib.util
import secrets
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from langorch.config import Settings
from langorch.domain.errors import DefinitionError, Problem

SECRET_PREFIX = "langorch/tools/"  # noqa: S105 - a name prefix, not a value
AGENT_SECRET_PREFIX = "langorch/agents/"  # noqa: S105 - a name prefix, not a value


@dataclass
class ExampleTools:
    """The example tool servers and agents running in this process."""

    registered: dict[str, str] = field(default_factory=dict)
    """Tool name -> the server's URL."""
    agents: dict[str, str] = field(default_factory=dict)
    """Agent name -> its URL."""
    _stops: list[Callable[[], None]] = field(default_factory=list)

    def stop(self) -> None:
        """Stop every server."""
        while self._stops:
            self._stops.pop()()


def start_example_tools(settings: Settings, examples: Path | None) -> ExampleTools:
    """Start and register the servers of every ``<example>/tools.yaml`` and ``agents.yaml``.

    Raises:
        DefinitionError: a ``tools.yaml`` or ``agents.yaml`` is malformed or names a missing
            server file.
    """
    from langorch.composition.bootstrap import build_container

    if examples is None or not examples.is_dir():
        return ExampleTools()
    return start_example_servers(build_container(settings), sorted(examples.iterdir()))


def start_example_servers(container: Any, folders: Iterable[Path]) -> ExampleTools:
    """Start and register the servers the ``tools.yaml`` / ``agents.yaml`` of ``folders`` name.

    Args:
        container: The deployment whose secrets, tools and agents registries get them.
        folders: Example folders (those without either file are skipped).

    Raises:
        DefinitionError: a manifest is malformed or names a missing server file.
    """
    started = ExampleTools()
    try:
        for folder in folders:
            if (folder / "tools.yaml").is_file():
                _start_tools(container, folder / "tools.yaml", started)
            if (folder / "agents.yaml").is_file():
                _start_agents(container, folder / "agents.yaml", started)
    except BaseException:
        started.stop()
        raise
    return started


def _start_tools(container: Any, spec_file: Path, started: ExampleTools) -> None:
    from langorch.app.tool_registry import AddTool, add_tool
    from langorch.domain.tool_policies import parse_policies
    from langorch.llm.builtin_tools import KNOWN_TOOLS

    for entry in _entries(spec_file):
        running = _load(spec_file.parent / entry["server"], spec_file).serve(
            token := secrets.token_urlsafe(24)
        )
        started._stops.append(running.stop)
        secret_id = f"{SECRET_PREFIX}{entry['name']}"
        container.secrets.put_json(secret_id, {"value": f"Bearer {token}"})
        add_tool(
            AddTool(
                name=entry["name"],
                url=running.url,
                allow=entry.get("allow") or (),
                headers=[f"Authorization=secret:{secret_id}"],
                description=str(entry.get("description") or ""),
                builtin_names=KNOWN_TOOLS,
                policies=parse_policies(
                    entry.get("policies") or [], f"{spec_file}: {entry['name']}", "policies"
                ),
                cost_per_call_usd=float(entry.get("cost") or 0.0),
                tool_costs=[f"{k}={v}" for k, v in (entry.get("tool_costs") or {}).items()],
            ),
            container.tool_servers,
            container.secrets,
        )
        started.registered[entry["name"]] = running.url


def _start_agents(container: Any, spec_file: Path, started: ExampleTools) -> None:
    from langorch.app.agents import AddAgent, add_agent

    server, entries, secret_ids = _agent_entries(spec_file)
    values = {secret_id: secrets.token_urlsafe(18) for secret_id in secret_ids}
    for secret_id, value in values.items():
        container.secrets.put_json(secret_id, {"value": value})
    running = _load(spec_file.parent / server, spec_file).serve(
        token := secrets.token_urlsafe(24), secrets=values
    )
    started._stops.append(running.stop)
    secret_id = f"{AGENT_SECRET_PREFIX}{spec_file.parent.name}"
    container.secrets.put_json(secret_id, {"value": f"Bearer {token}"})
    for entry in entries:
        url = running.url.rstrip("/") + "/" + str(entry.get("path") or entry["name"]).lstrip("/")
        add_agent(
            AddAgent(
                name=entry["name"],
                url=url,
                actions=[str(a) for a in entry.get("actions") or ()],
                mode=str(entry.get("mode") or "step"),
                headers=[f"Authorization=secret:{secret_id}"],
                resource_key=entry.get("resource_key"),
                limit=entry.get("limit"),
                max_steps_per_batch=entry.get("max_steps"),
                description=str(entry.get("description") or ""),
            ),
            container,
        )
        started.agents[entry["name"]] = url


def _entries(spec_file: Path) -> list[dict[str, Any]]:
    document = yaml.safe_load(spec_file.read_text(encoding="utf-8")) or {}
    entries = document.get("tools") if isinstance(document, dict) else None
    problems: list[Problem] = []
    if not isinstance(entries, list):
        problems.append(Problem("tools", "must be a list of {name, server, allow}"))
        entries = []
    for index, entry in enumerate(entries):
        if not isinstance(entry, dict) or not {"name", "server"} <= set(entry):
            problems.append(Problem(f"tools[{index}]", "needs a name and a server file"))
        elif not (spec_file.parent / str(entry["server"])).is_file():
            problems.append(Problem(f"tools[{index}].server", f"no file {entry['server']}"))
    if problems:
        raise DefinitionError(str(spec_file), problems)
    return entries


def _agent_entries(spec_file: Path) -> tuple[str, list[dict[str, Any]], list[str]]:
    document = yaml.safe_load(spec_file.read_text(encoding="utf-8")) or {}
    problems: list[Problem] = []
    if not isinstance(document, dict):
        raise DefinitionError(str(spec_file), [Problem("", "must be {server, agents: [...]}")])
    server = document.get("server")
    if not isinstance(server, str) or not (spec_file.parent / server).is_file():
        problems.append(Problem("server", f"no server file {server!r} beside agents.yaml"))
    entries = document.get("agents")
    if not isinstance(entries, list):
        problems.append(Problem("agents", "must be a list of {name, path, actions, mode}"))
        entries = []
    for index, entry in enumerate(entries):
        if not isinstance(entry, dict) or not {"name", "actions"} <= set(entry):
            problems.append(Problem(f"agents[{index}]", "needs a name and its actions"))
    secret_ids = document.get("secrets") or []
    if not isinstance(secret_ids, list) or not all(isinstance(i, str) for i in secret_ids):
        problems.append(Problem("secrets", "must be a list of secret ids"))
        secret_ids = []
    if problems:
        raise DefinitionError(str(spec_file), problems)
    return str(server), entries, secret_ids


def _load(path: Path, spec_file: Path) -> Any:
    spec = importlib.util.spec_from_file_location(f"langorch_example_{path.stem}", path)
    if spec is None or spec.loader is None:
        raise DefinitionError(str(spec_file), [Problem("server", f"cannot load {path}")])
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
