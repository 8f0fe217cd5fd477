"""``langorch test``: run a tests file's cases on this machine, offline, with no side effects.

Each tests file gets a scratch home (the embedded SQLite stores in a temporary folder, gone
when the file's cases are done) holding the built-in blocks, the file's definitions, and the
example's tools (``tools.yaml``) and agents (``agents.yaml``) registered at addresses that
resolve nowhere: their calls are answered by the case's script (:mod:`langorch.app.workflow_tests`),
never sent. Each case runs in a container of its own over that home, with its scripted ports.
"""

from __future__ import annotations

import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from langorch.app.workflow_tests import (
    Notes,
    ScriptedHttp,
    ScriptedModels,
    ScriptedTools,
    VirtualClock,
    run_case,
)
from langorch.composition.embedded import EmbeddedContainer
from langorch.config import Settings
from langorch.domain.errors import DefinitionError, LangorchError, Problem
from langorch.domain.workflow_tests import (
    Mismatch,
    Observed,
    TestCase,
    TestsFile,
    WorkflowTestsError,
    check_case,
    parse_tests,
)

TESTS_FILE = "tests.yaml"
TOOLS_HOST = "tools.langorch-test.invalid"
"""Registered tools are given URLs on this host (``.invalid`` never resolves): only the script
answers them."""
AGENTS_URL = "http://agents.langorch-test.invalid"
"""An example's agents are registered at ``<AGENTS_URL>/<path>``; a case's ``http`` answers
them by that URL."""


@dataclass
class CaseResult:
    """One case's outcome."""

    file: str
    name: str
    mismatches: list[Mismatch]
    observed: Observed | None
    seconds: float
    error: str | None = None
    """Why the case could not run (its run could not start, ...)."""

    @property
    def passed(self) -> bool:
        """Whether every expectation held."""
        return self.error is None and not self.mismatches


@dataclass
class _Email:
    """The ``email`` port of a test: nothing is sent; what would have been is counted."""

    sent: list[Any] = field(default_factory=list)

    def send(self, email: Any) -> str:
        self.sent.append(email)
        return f"test-{len(self.sent)}"


class _CaseContainer(EmbeddedContainer):
    """The scratch home's stores, with the case's scripted tool connector."""

    def __init__(self, settings: Settings, *, tools: ScriptedTools, **ports: Any) -> None:
        super().__init__(settings, **ports)
        self._tools = tools

    @property
    def tool_connector(self) -> ScriptedTools:  # type: ignore[override]
        return self._tools


def find_tests_files(targets: list[str]) -> list[Path]:
    """The tests files ``targets`` name: files, folders holding ``tests.yaml``, or (none) every
    ``examples/*/tests.yaml`` under the current folder.

    Raises:
        WorkflowTestsError: a target is neither a tests file nor a folder with one.
    """
    if not targets:
        return sorted(Path("examples").glob(f"*/{TESTS_FILE}"))
    files: list[Path] = []
    problems: list[Problem] = []
    for target in targets:
        path = Path(target)
        if path.is_dir() and (path / TESTS_FILE).is_file():
            files.append(path / TESTS_FILE)
        elif path.is_file():
            files.append(path)
        else:
            problems.append(
                Problem(target, f"no such tests file, nor a folder with a {TESTS_FILE}")
            )
    if problems:
        raise WorkflowTestsError("langorch test", problems)
    return files


def load_tests(path: Path) -> TestsFile:
    """Read and check a tests file.

    Raises:
        WorkflowTestsError: it cannot be read or parsed, or a field is wrong (with its path).
    """
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError) as exc:
        raise WorkflowTestsError(f"tests file {path}", [Problem("", str(exc))]) from exc
    return parse_tests(data, source=str(path))


def run_file(path: Path, *, only: str | None = None) -> Iterator[CaseResult]:
    """Run every case of the tests file ``path`` (those whose name contains ``only``).

    Raises:
        WorkflowTestsError: the tests file is malformed.
        DefinitionError: its definitions do not validate.
    """
    tests = load_tests(path)
    folder = path.parent
    with tempfile.TemporaryDirectory(prefix="langorch-test-") as home:
        settings = Settings(region="us-east-1", local_home=home)
        base = EmbeddedContainer(settings)
        base.ensure_resources()
        allowed = _register(base, folder, tests)
        default = None if all(c.workflow for c in tests.cases) else _workflow(tests, folder)
        for case in tests.cases:
            if only and only not in case.name:
                continue
            workflow = case.workflow or default
            assert workflow is not None
            yield _run_case(case, workflow, settings, allowed, folder, str(path))


def _register(container: EmbeddedContainer, folder: Path, tests: TestsFile) -> dict[str, list[str]]:
    """Store the built-ins, the example's tools and agents (unreachable URLs), and the
    definitions; returns each tool server's allowed tools."""
    from langorch.app.definitions import register_files, seed_builtins
    from langorch.app.tool_registry import known_tool_names

    seed_builtins(container.definitions)
    allowed = _register_tools(container, folder)
    _register_agents(container, folder)
    missing = [f for f in tests.definitions if not (folder / f).is_file()]
    if missing:
        raise WorkflowTestsError(
            f"tests file {folder / TESTS_FILE}",
            [
                Problem(f"definitions[{tests.definitions.index(m)}]", f"no file {m} in {folder}")
                for m in missing
            ],
        )
    register_files(
        container.definitions,
        [str(folder / f) for f in tests.definitions],
        tools=known_tool_names(container.tool_servers),
        agents=container.agents.list(),
    )
    return allowed


def _register_tools(container: EmbeddedContainer, folder: Path) -> dict[str, list[str]]:
    from langorch.app.tool_registry import AddTool, add_tool
    from langorch.llm.builtin_tools import KNOWN_TOOLS

    spec = folder / "tools.yaml"
    if not spec.is_file():
        return {}
    document = yaml.safe_load(spec.read_text(encoding="utf-8")) or {}
    allowed: dict[str, list[str]] = {}
    for entry in document.get("tools") or []:
        name = str(entry["name"])
        allow = [str(a) for a in entry.get("allow") or ()]
        add_tool(
            AddTool(
                name=name,
                url=f"http://{TOOLS_HOST}/{name}/mcp",
                allow=allow,
                headers=[],
                description=str(entry.get("description") or ""),
                builtin_names=KNOWN_TOOLS,
            ),
            container.tool_servers,
            container.secrets,
        )
        allowed[name] = allow
    return allowed


def _register_agents(container: EmbeddedContainer, folder: Path) -> None:
    from langorch.app.agents import AddAgent, add_agent

    spec = folder / "agents.yaml"
    if not spec.is_file():
        return
    document = yaml.safe_load(spec.read_text(encoding="utf-8")) or {}
    for secret_id in document.get("secrets") or []:
        container.secrets.put_json(str(secret_id), {"value": "test-secret"})
    for entry in document.get("agents") or []:
        add_agent(
            AddAgent(
                name=entry["name"],
                url=f"{AGENTS_URL}/{str(entry.get('path') or entry['name']).lstrip('/')}",
                actions=[str(a) for a in entry.get("actions") or ()],
                mode=str(entry.get("mode") or "step"),
                headers=[],
                resource_key=entry.get("resource_key"),
                limit=entry.get("limit"),
                max_steps_per_batch=entry.get("max_steps"),
                description=str(entry.get("description") or ""),
            ),
            container,
        )


def _workflow(tests: TestsFile, folder: Path) -> str:
    if tests.workflow:
        return tests.workflow
    from langorch.domain.loading import load_file

    names: list[str] = []
    for file in tests.definitions:
        names += [w.plan_id for w in load_file(folder / file).workflows]
    if len(names) != 1:
        raise WorkflowTestsError(
            f"tests file {folder / TESTS_FILE}",
            [
                Problem(
                    "workflow",
                    f"the definitions hold {len(names)} workflows "
                    f"({', '.join(names) or 'none'}): name the one to test",
                )
            ],
        )
    return names[0]


def _run_case(
    case: TestCase,
    workflow: str,
    settings: Settings,
    allowed: dict[str, list[str]],
    folder: Path,
    file: str,
) -> CaseResult:
    started = time.monotonic()
    notes = Notes()
    clock = VirtualClock()
    container = _CaseContainer(
        settings,
        tools=ScriptedTools(case.tools, allowed, notes),
        clock=clock,
        llm=ScriptedModels(case.models, case.prompts, notes),  # type: ignore[arg-type]
        http=ScriptedHttp(case.http, notes),
        email=_Email(),
    )
    try:
        for key, source in case.files.items():
            container.bucket.put(key, folder / source)
        observed = run_case(case, workflow, container, notes, clock)
    except (LangorchError, OSError) as exc:
        return CaseResult(file, case.name, [], None, time.monotonic() - started, str(exc))
    mismatches = check_case(case.expect, observed)
    return CaseResult(file, case.name, mismatches, observed, time.monotonic() - started)


__all__ = [
    "CaseResult",
    "DefinitionError",
    "find_tests_files",
    "load_tests",
    "run_file",
]
