"""A short LLM step in a fresh process: its SDK loads before its time starts (PERFORMANCE P3).

A cold import of langchain-openai takes seconds on a busy host; paid inside the step's
``timeout_seconds``, it cost a 5 s step its first attempt before any request was sent. Here the
step runs in a new interpreter whose import of ``langchain_openai`` is made as slow as the whole
step (a stand-in for that host, so the outcome does not depend on this machine's speed), and the
loopback OpenAI server in this process sees which attempt asked.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.llm_servers import FakeOpenAI

ROOT = Path(__file__).resolve().parents[2]

STEP_SECONDS = 5

COLD_STEP = """
import importlib.abc, json, sys, time
sys.path[:0] = [{root!r}, {shared!r}]


class SlowImport(importlib.abc.MetaPathFinder):
    # A busy host's cold import of the SDK: as long as the whole step.
    def find_spec(self, name, path=None, target=None):
        if name == "langchain_openai":
            time.sleep({seconds})
        return None


sys.meta_path.insert(0, SlowImport())

from langorch.app.runs import StartRun, drive, start_run
from langorch.domain.definitions import BlockDefinition, PlanStep, TaskPlan
from langorch.llm import LLMRegistry
from tests.fakes import Fakes

assert "langchain_openai" not in sys.modules  # cold: nothing loaded it yet
fakes = Fakes({{}}, default_llm_provider="openai")
fakes.llm = LLMRegistry(
    default_provider="openai", openai_api_key="sk-test", openai_base_url={base_url!r}
)
fakes.definitions.put_block(
    BlockDefinition(
        block_id="b_title",
        output_keys=["title"],
        prompt_template="Write a title.",
        timeout_seconds={seconds},
        max_retries=1,
    )
)
fakes.definitions.put_workflow(
    TaskPlan(plan_id="titles", memory=False, steps=[PlanStep(step_id="title", block_id="b_title")])
)
run, _ = start_run(StartRun("titles"), fakes)
result = drive(run.run_id, fakes, on_approval=lambda r: {{}}, sleep=lambda s: None)
events = [e.model_dump(mode="json") for e in fakes.runs.get_timeline(run.run_id)]
print(json.dumps({{"status": result.status, "outputs": result.outputs, "events": events}}))
"""


def _run_cold(server: FakeOpenAI) -> dict[str, Any]:
    script = COLD_STEP.format(
        root=str(ROOT),
        shared=str(ROOT / "shared"),
        seconds=STEP_SECONDS,
        base_url=server.base_url,
    )
    done = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=ROOT,
        env={"AWS_DEFAULT_REGION": "us-east-1", "PATH": "/usr/bin:/bin"},
        check=True,
    )
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


@pytest.mark.subprocess
def test_a_cold_short_llm_step_sends_its_request_on_its_first_attempt(
    openai_server: FakeOpenAI,
) -> None:
    # Given a fresh interpreter whose LLM SDK takes as long to import as the step may run,
    # and a 5 s step that may try twice
    openai_server.answer({"title": "Owls at dusk"})

    # When the step runs
    result = _run_cold(openai_server)

    # Then the server got one request, and it was the first attempt's: the step finished on
    # attempt 1, never retried
    assert openai_server.calls == 1
    assert result["status"] == "succeeded"
    assert result["outputs"] == {"title": "Owls at dusk"}
    steps = [(e["type"], e["detail"].get("attempt")) for e in result["events"]]
    assert ("step_finished", 1) in steps
    assert not [t for t, _ in steps if t == "step_retried"]
