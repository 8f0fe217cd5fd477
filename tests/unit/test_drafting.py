"""Plans from an intent (seed 000's ``mock_decompose`` made real): the deterministic decomposer,
the model's draft validated like any definition, and ``langorch workflows draft``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from langorch.app.drafting import draft_workflow
from langorch.cli.main import main
from langorch.domain.definitions import BlockDefinition
from langorch.domain.drafting import NoMatchingBlocksError, decompose
from langorch.domain.lookup import InMemoryLookup
from langorch.llm import LLMRequest, LLMResult

LUNCH = Path(__file__).resolve().parents[2] / "examples" / "lunch_order" / "definitions.yaml"


def _block(block_id: str, **fields: Any) -> BlockDefinition:
    return BlockDefinition.model_validate(
        {"block_id": block_id, "prompt_template": "p", "output_keys": ["x"], **fields}
    )


BLOCKS = [
    _block(
        "summarize_invoice",
        name="Summarize invoice",
        input_keys=["invoice_text"],
        output_keys=["invoice_summary"],
    ),
    _block(
        "fetch_invoice",
        description="Download the invoice PDF",
        input_keys=["invoice_url"],
        output_keys=["invoice_text"],
        tags=["billing"],
    ),
    _block("book_flight", name="Book a flight", input_keys=["city"], output_keys=["booking"]),
    _block(
        "route_invoice",
        block_type="decision",
        input_keys=["invoice_summary"],
        output_keys=[],
        branches={"pay": "x", "hold": "y"},
    ),
]


# --- the deterministic decomposer -----------------------------------------------------------


def test_the_intent_picks_the_blocks_whose_words_it_shares() -> None:
    # Given blocks about invoices and one about flights
    # When an intent about invoices is decomposed
    drafted = decompose("Summarize every invoice", BLOCKS)
    # Then the invoice blocks are picked (by name, description, keys), the flight one is not,
    # and neither is the decision, whose branches no intent names
    assert sorted(s.block_id for s in drafted.plan.steps) == ["fetch_invoice", "summarize_invoice"]
    assert {p.block_id: p.matched for p in drafted.picks}["summarize_invoice"] == (
        "invoice",
        "summarize",
    )


def test_a_reader_runs_after_the_writer_of_its_input() -> None:
    # Given the summary block reads the text the fetch block writes (and sorts before it)
    drafted = decompose("summarize the invoice", BLOCKS)
    # Then the fetch step comes first and the summary depends on it
    steps = [(s.step_id, s.depends_on) for s in drafted.plan.steps]
    assert steps == [("fetch_invoice", []), ("summarize_invoice", ["fetch_invoice"])]


def test_keys_no_picked_block_writes_are_the_workflows_inputs() -> None:
    drafted = decompose("summarize the invoice", BLOCKS)
    assert drafted.plan.inputs_schema is not None
    assert set(drafted.plan.inputs_schema.properties) == {"invoice_url"}
    assert drafted.plan.user_intent == "summarize the invoice"
    assert drafted.plan.plan_id == "summarize_invoice"


def test_the_same_intent_and_blocks_give_the_same_plan() -> None:
    first = decompose("summarize the invoice", BLOCKS).plan
    again = decompose("summarize the invoice", list(reversed(BLOCKS))).plan
    assert first == again


def test_an_intent_no_block_matches_is_refused_with_what_to_do() -> None:
    with pytest.raises(NoMatchingBlocksError, match="blocks list"):
        decompose("water the plants", BLOCKS)


# --- the use-case: composed, then validated -------------------------------------------------


class PlanningModel:
    """A model that answers the drafting request with a given plan, and keeps the request."""

    def __init__(self, plan: dict[str, Any]) -> None:
        self.plan = plan
        self.requests: list[LLMRequest] = []

    def invoke(self, request: LLMRequest) -> LLMResult:
        self.requests.append(request)
        return LLMResult({"plan": self.plan}, request.provider, "m", 1, 1)


def test_the_configured_model_composes_the_plan_from_the_blocks() -> None:
    # Given a model that answers with a plan using two of the blocks
    model = PlanningModel(
        {
            "plan_id": "invoices",
            "steps": [
                {"step_id": "fetch", "block_id": "fetch_invoice"},
                {"step_id": "sum", "block_id": "summarize_invoice", "depends_on": ["fetch"]},
            ],
        }
    )
    # When a workflow is drafted with it
    draft = draft_workflow(
        "Summarize invoices", BLOCKS, InMemoryLookup(BLOCKS), llm=model, provider="openai"
    )
    # Then the model was shown the blocks and the intent, and its plan came back validated:
    # the URL nothing provides is a warning at its path, nothing is an error
    prompt = model.requests[0].prompt
    assert "Summarize invoices" in prompt and '"block_id": "book_flight"' in prompt
    assert [s.step_id for s in draft.plan.steps] == ["fetch", "sum"]
    assert draft.plan.user_intent == "Summarize invoices"
    assert draft.errors == []
    assert [w.path for w in draft.warnings] == ["steps[0].block_id"]
    assert draft.composed_by == "openai"


def test_a_model_plan_naming_an_unknown_block_comes_back_with_the_error() -> None:
    model = PlanningModel({"plan_id": "p", "steps": [{"step_id": "a", "block_id": "nope"}]})
    draft = draft_workflow(
        "anything", BLOCKS, InMemoryLookup(BLOCKS), llm=model, provider="bedrock"
    )
    assert [e.path for e in draft.errors] == ["steps[0].block_id"]


# --- the command ------------------------------------------------------------------------------


def test_draft_prints_a_workflow_that_validates_and_stores_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # Given no stack, the offline provider, and the lunch example's blocks
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("LANGORCH_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("LANGORCH_DEFAULT_LLM_PROVIDER", "offline")
    # When a workflow is drafted from an intent
    code = main(["workflows", "draft", "--intent", "Order lunch from Uber Eats", str(LUNCH)])
    printed = capsys.readouterr().out
    # Then it prints a workflow of the matching blocks, wired by their keys
    assert code == 0
    plan = yaml.safe_load(printed)["workflows"][0]
    assert [s["block_id"] for s in plan["steps"]] == [
        "open_uber_eats",
        "add_to_cart_generic",
        "place_order",
    ]
    assert plan["steps"][2]["depends_on"] == ["add_to_cart_generic"]
    # And what it printed validates as it is, with the example's blocks; nothing was stored
    drafted = tmp_path / "drafted.yaml"
    drafted.write_text(printed)
    assert main(["workflows", "validate", str(LUNCH), str(drafted), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["warnings"] == []
    assert not (tmp_path / "home").exists()
