"""``langorch dev``: start the examples' MCP tool servers and register them as tools.

An example folder may ship MCP servers and a ``tools.yaml`` naming them::

    tools:
      - name: orders               # the name blocks list in tools_required
        server: mcp_server.py      # a module beside tools.yaml with serve(token) -> .url, .stop()
        allow: [lookup_order]      # optional: the tools a model may call
        description: ...

Each server starts in this process on a free loopback port with a fresh bearer token; the
token goes to the local Secrets Manager (``langorch/tools/<name>``, ``{"value": "Bearer …"}``)
and the server is registered with ``--header Authorization=secret:langorch/tools/<name>``, as
an operator would with ``langorch tools add``. The token is never printed.
"""

from __future__ import annotations

import importlib.util
import secrets
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from langorch.config import Settings
from langorch.domain.errors import DefinitionError, Problem

SECRET_PREFIX = "langorch/tools/"  # noqa: S105 - a name prefix, not a value


@dataclass
class ExampleTools:
    """The example tool servers running in this process."""

    registered: dict[str, str] = field(default_factory=dict)
    """Tool name -> the server's URL."""
    _stops: list[Callable[[], None]] = field(default_factory=list)

    def stop(self) -> None:
        """Stop every server."""
        while self._stops:
            self._stops.pop()()


def start_example_tools(settings: Settings, examples: Path | None) -> ExampleTools:
    """Start and register the MCP servers of every ``<example>/tools.yaml``.

    Raises:
        DefinitionError: a ``tools.yaml`` is malformed or names a missing server file.
    """
    from langorch.app.tool_registry import AddTool, add_tool
    from langorch.composition.bootstrap import build_container
    from langorch.llm.builtin_tools import KNOWN_TOOLS

    started = ExampleTools()
    if examples is None or not examples.is_dir():
        return started
    container = build_container(settings)
    try:
        for spec_file in sorted(examples.glob("*/tools.yaml")):
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
                    ),
                    container.tool_servers,
                    container.secrets,
                )
                started.registered[entry["name"]] = running.url
    except BaseException:
        started.stop()
        raise
    return started


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


def _load(path: Path, spec_file: Path) -> Any:
    spec = importlib.util.spec_from_file_location(f"langorch_example_{path.stem}", path)
    if spec is None or spec.loader is None:
        raise DefinitionError(str(spec_file), [Problem("server", f"cannot load {path}")])
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
