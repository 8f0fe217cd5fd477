"""``langorch`` as a process: what a shell sees."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def test_a_reader_that_goes_away_ends_the_command_quietly_with_sigpipe_status(tmp_path: Path):
    # Given `langorch … | head`, where the reader has already closed its end of the pipe
    read_end, write_end = os.pipe()
    os.close(read_end)
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(REPO / "shared"), str(REPO)]),
        "LANGORCH_HOME": str(tmp_path / "no-stack"),
    }
    env.pop("LANGORCH_ENDPOINT_URL", None)

    # When a command prints its result into that pipe
    try:
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "langorch.cli.main",
                "workflows",
                "validate",
                str(REPO / "examples" / "blog_review" / "definitions.yaml"),
            ],
            stdout=write_end,
            stderr=subprocess.PIPE,
            env=env,
            cwd=tmp_path,
            timeout=120,
            check=False,
        )
    finally:
        os.close(write_end)

    # Then it stops without a word, with the status a shell gives a command killed by SIGPIPE
    assert done.stderr.decode() == ""
    assert done.returncode == 141


def test_every_command_accepts_home_before_or_after_its_name() -> None:
    from langorch.cli.main import build_parser

    parser = build_parser()
    assert parser.parse_args(["--home", "/srv/a", "runs", "list"]).home == "/srv/a"
    assert parser.parse_args(["runs", "list", "--home", "/srv/b"]).home == "/srv/b"
    assert parser.parse_args(["dev", "--home", "/srv/c"]).home == "/srv/c"
    assert parser.parse_args(["workflows", "list"]).home is None


HEAVY = (
    *("pydantic", "pydantic_settings", "boto3", "botocore", "moto", "langgraph", "langchain_core"),
    *("yaml", "mcp", "jinja2", "asyncio"),
)
"""Packages a command that does not use them must not pay for (issue 26: a command in 0.3 s)."""

PROBE = """
import json, sys
sys.path.insert(0, {shared!r})  # this tree's code, not the installed one
from langorch.cli.main import main
code = main({argv!r})
loaded = sorted({{m.split(".")[0] for m in sys.modules}} & set({heavy!r}))
groups = sorted(m for m in sys.modules if m.startswith("langorch.cli.commands."))
watched = sorted(m for m in sys.modules if m in {watched!r})
print(json.dumps({{"code": code, "heavy": loaded, "groups": groups, "watched": watched}}))
"""

DEFINITION_MODELS = ("langorch.domain.definitions", "langorch.domain.step_settings")
"""The modules of the definition models: a command that only lists definitions must not build
their pydantic schemas (issue 26: most of what ``workflows list`` cost)."""
NOT_FOR_VALIDATION = (
    "langorch.domain.approvals.record",
    "langorch.domain.approvals.audit",
    "urllib.request",
    "http.client",
    "langorch.domain.ckp.binding",
    "langorch.domain.ckp.compiler",
    "langorch.llm.registry",
    "langorch.llm.builtin_tools",
    "logging",
)
"""What checking a definitions file does not use: the approval record's and audit trail's
models, the HTTP client the ``http_get`` tool fetches with, (for a file with no CKP procedure)
the CKP compiler and binding, the LLM providers and tools (it reads their names only), and
``logging`` (it logs nothing) (issue 26)."""


NOT_OFFLINE = ("langorch.config", "langorch.domain.tool_servers")
"""What an offline command (no stack to talk to) does not use: the settings' model, the tool
registry's models (issue 26)."""


def _loaded_by(
    argv: list[str], cwd: Path, watched: tuple[str, ...] = (*DEFINITION_MODELS, *NOT_FOR_VALIDATION)
) -> dict[str, object]:
    """What a fresh interpreter has imported after running ``langorch argv`` (of ``watched``,
    and of the heavy packages and command groups)."""
    code = PROBE.format(shared=str(REPO / "shared"), argv=argv, heavy=HEAVY, watched=watched)
    env = {"PATH": "/usr/bin:/bin", "AWS_DEFAULT_REGION": "us-east-1"}
    done = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        env=env,
        cwd=cwd,
        timeout=120,
        check=True,
    )
    result: dict[str, object] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


@pytest.mark.subprocess
def test_help_loads_no_command_group_and_no_heavy_package(tmp_path: Path) -> None:
    # Given a fresh interpreter
    # When it runs `langorch --help`
    loaded = _loaded_by(["--help"], tmp_path)

    # Then it listed the groups without importing one, nor pydantic, boto3, LangGraph, moto, ...
    assert loaded == {"code": 0, "heavy": [], "groups": [], "watched": []}


@pytest.mark.subprocess
def test_a_local_runs_list_loads_its_group_and_the_embedded_store_only(tmp_path: Path) -> None:
    # Given a local home (its stack file and SQLite store)
    home = tmp_path / "home"
    home.mkdir()
    stack = {"endpoint_url": "http://127.0.0.1:9", "settings": {"local_home": str(home)}}
    (home / "stack.json").write_text(json.dumps(stack))

    # When a fresh interpreter runs `langorch runs list` against it
    loaded = _loaded_by(["--home", str(home), "runs", "list"], tmp_path)

    # Then it read the store with pydantic (the records' models) and nothing heavier,
    # and loaded only the `runs` group (with the redrive, fork and diff commands it registers)
    assert loaded["code"] == 0
    assert loaded["heavy"] == ["pydantic"]
    assert loaded["groups"] == [
        "langorch.cli.commands._start_input",
        "langorch.cli.commands.recovery",
        "langorch.cli.commands.run_diff",
        "langorch.cli.commands.runs",
    ]


@pytest.mark.subprocess
def test_a_local_runs_show_loads_neither_boto3_nor_botocore(tmp_path: Path) -> None:
    from langorch.composition.embedded import EmbeddedContainer
    from langorch.config import Settings
    from tests.support.records import a_run

    # Given a local home with a stack that has a state machine, and a run in its store
    home = tmp_path / "home"
    machine = "arn:aws:states:us-east-1:123456789012:stateMachine:langorch-runs"
    settings = {"local_home": str(home), "state_machine_arn": machine}
    EmbeddedContainer(Settings.model_validate(settings)).runs.create_run(a_run("run-1"))
    stack = {"endpoint_url": "http://127.0.0.1:9", "settings": settings}
    (home / "stack.json").write_text(json.dumps(stack))

    # When a fresh interpreter runs `langorch runs show` against it
    loaded = _loaded_by(["--home", str(home), "runs", "show", "run-1"], tmp_path)

    # Then it read the run with pydantic and asked the emulator for its execution without
    # importing boto3 or botocore (nor anything else heavy)
    assert loaded["code"] == 0
    assert loaded["heavy"] == ["pydantic"]


LISTINGS = [
    ["agents", "list"],
    ["resources", "list"],
    ["approvals", "list"],
    ["workflows", "list"],
    ["blocks", "list"],
    ["tools", "list"],
]
"""Commands that read a local home's SQLite store and render nothing: pydantic is all they need."""


@pytest.mark.subprocess
@pytest.mark.parametrize("command", LISTINGS, ids=" ".join)
def test_a_local_listing_loads_no_package_heavier_than_pydantic(
    tmp_path: Path, command: list[str]
) -> None:
    # Given a local home (its stack file and SQLite store)
    home = tmp_path / "home"
    home.mkdir()
    stack = {"endpoint_url": "http://127.0.0.1:9", "settings": {"local_home": str(home)}}
    (home / "stack.json").write_text(json.dumps(stack))

    # When a fresh interpreter runs the listing against it
    loaded = _loaded_by(["--home", str(home), *command], tmp_path)

    # Then it read the store with pydantic and imported neither Jinja2 (no template is rendered),
    # botocore (no AWS service is called), pydantic-settings nor asyncio
    assert loaded["code"] == 0
    assert loaded["heavy"] == ["pydantic"]


@pytest.mark.subprocess
@pytest.mark.parametrize("group", ["workflows", "blocks"])
def test_a_local_definitions_listing_builds_no_definition_model(tmp_path: Path, group: str) -> None:
    from langorch.composition.embedded import EmbeddedContainer
    from langorch.config import Settings
    from langorch.domain.definitions import BlockDefinition, PlanStep, TaskPlan

    # Given a local home that stores a block and a workflow using it
    home = tmp_path / "home"
    definitions = EmbeddedContainer(Settings.model_validate({"local_home": str(home)})).definitions
    definitions.put_block(BlockDefinition(block_id="summarize", name="Summarize"))
    step = PlanStep(step_id="summarize", block_id="summarize")
    definitions.put_workflow(TaskPlan(plan_id="digest", name="Digest", steps=[step]))
    stack = {"endpoint_url": "http://127.0.0.1:9", "settings": {"local_home": str(home)}}
    (home / "stack.json").write_text(json.dumps(stack))

    # When a fresh interpreter lists the group's definitions
    loaded = _loaded_by(["--home", str(home), "--json", group, "list"], tmp_path)

    # Then it listed them from the stored JSON: no definition model was imported (nor LangGraph
    # or anything else heavier than pydantic)
    assert loaded["code"] == 0
    assert loaded["watched"] == []
    assert loaded["heavy"] == ["pydantic"]


@pytest.mark.subprocess
def test_an_offline_validate_loads_only_what_checking_the_file_needs(tmp_path: Path) -> None:
    # Given a definitions file and no stack to check it against
    definitions = REPO / "examples" / "blog_review" / "definitions.yaml"

    # When a fresh interpreter validates it
    loaded = _loaded_by(["workflows", "validate", str(definitions)], tmp_path)

    # Then it built the definition models (and read YAML, checked templates with Jinja2) but
    # imported neither the approval record's models nor an HTTP client, nor LangGraph, boto3…
    assert loaded["code"] == 0
    assert loaded["watched"] == list(DEFINITION_MODELS)
    assert loaded["heavy"] == ["jinja2", "pydantic", "yaml"]


SEED_000 = [
    str(REPO / "examples" / "seed000" / f"{name}.json")
    for name in ("query_memory", "open_uber_eats", "add_to_cart_generic", "lunch_plan")
]
"""The README's first ``workflows validate``: seed 000's blocks and plan, JSON files."""


@pytest.mark.subprocess
def test_an_offline_validate_of_json_files_reads_no_yaml(tmp_path: Path) -> None:
    # Given the README's seed-000 JSON files and no stack to check them against

    # When a fresh interpreter validates them
    watched = (*DEFINITION_MODELS, *NOT_FOR_VALIDATION, *NOT_OFFLINE)
    loaded = _loaded_by(["workflows", "validate", *SEED_000], tmp_path, watched)

    # Then it built the definition models and nothing heavier: no YAML parser (the built-in
    # blocks are read from their generated JSON), no Jinja2 (no template has {{ }}), neither
    # the settings' model nor the tool registry's (there is no stack to read them for)
    assert loaded["code"] == 0
    assert loaded["watched"] == list(DEFINITION_MODELS)
    assert loaded["heavy"] == ["pydantic"]


def test_the_help_listing_every_group_is_the_same_loaded_or_not() -> None:
    from langorch.cli.main import build_parser

    # Given the parser with every group loaded, and the one a bare `langorch --help` builds
    full, listed = build_parser(), build_parser([])

    # Then both list the same groups with the same help (the table in
    # langorch.cli.commands agrees with what each group's module registers)
    assert listed.format_help() == full.format_help()
