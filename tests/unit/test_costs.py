"""Dollar cost per LLM call, step and run (issue 29, item 1), on fakes.

The fake priced model is the offline provider under a model name the workflow prices itself
(``prices: {offline/priced: …}``): its token counts are deterministic, so the timeline's costs
can be checked against the price table times the recorded tokens.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from langorch.adapters.prices import read_prices
from langorch.app.runs import RunSegment, StartRun, run_segment, start_run
from langorch.domain.errors import DefinitionError
from langorch.domain.loading import load_text
from langorch.domain.prices import PriceTable, TokenPrice, parse_prices
from langorch.domain.runs import TimelineEvent, TimelineEventType
from tests.fakes import Fakes
from tests.integration.conftest import register_text

INPUT, OUTPUT = 3.0, 15.0  # US dollars per million tokens

FLOW = f"""
blocks:
  - block_id: b_summary
    input_keys: [topic]
    output_keys: [summary]
    prompt_template: "Summarise {{{{topic}}}} in one line"
  - block_id: b_title
    input_keys: [summary]
    output_keys: [title]
    prompt_template: "A title for {{{{summary}}}}"
    max_retries: 2
workflows:
  - plan_id: priced
    memory: false
    llm_model: priced
    prices: {{"offline/priced": {{input: {INPUT}, output: {OUTPUT}}}}}
    steps:
      - {{step_id: summary, block_id: b_summary}}
      - {{step_id: title, block_id: b_title, depends_on: [summary], retry_backoff_seconds: 0}}
"""


def _run(deps: Fakes) -> tuple[str, list[TimelineEvent]]:
    run, _ = start_run(StartRun("priced", input={"topic": "tea"}), deps)
    assert run_segment(RunSegment(run.run_id), deps).status == "succeeded"
    return run.run_id, deps.runs.get_timeline(run.run_id)


def _priced(event: TimelineEvent) -> float:
    assert event.tokens is not None
    return (event.tokens.input * INPUT + event.tokens.output * OUTPUT) / 1_000_000


def test_each_step_costs_its_recorded_tokens_times_the_workflows_prices() -> None:
    # Given a workflow whose two LLM steps use a priced fake model
    deps = Fakes()
    register_text(deps, FLOW)  # type: ignore[arg-type]

    # When a run of it ends
    run_id, timeline = _run(deps)

    # Then every finished step's cost is the price table times the tokens it recorded
    finished = [e for e in timeline if e.type is TimelineEventType.step_finished]
    assert [e.step_id for e in finished] == ["summary", "title"]
    for event in finished:
        assert event.detail["cost_usd"] == pytest.approx(_priced(event), abs=1e-9)
        assert event.detail["cost_usd"] > 0
    # And the run's cost is their sum
    assert deps.runs.get_run(run_id).cost_usd == pytest.approx(
        sum(_priced(e) for e in finished), abs=1e-9
    )


def test_a_failed_attempt_is_priced_and_counted_in_the_runs_cost() -> None:
    # Given a title step whose first attempt fails after the prompt was billed
    deps = Fakes(script={"b_title": {"raise": "overloaded", "times": 1}})
    register_text(deps, FLOW)  # type: ignore[arg-type]

    # When a run of it ends (the retry answers)
    run_id, timeline = _run(deps)

    # Then the retried attempt is on the timeline with its cost
    (retried,) = [e for e in timeline if e.type is TimelineEventType.step_retried]
    assert retried.detail["cost_usd"] == pytest.approx(_priced(retried), abs=1e-9)
    assert retried.detail["cost_usd"] > 0
    # And the run's cost counts it beside the steps that finished
    priced = [
        e
        for e in timeline
        if e.type in (TimelineEventType.step_finished, TimelineEventType.step_retried)
    ]
    assert deps.runs.get_run(run_id).cost_usd == pytest.approx(
        sum(_priced(e) for e in priced), abs=1e-9
    )


def test_a_price_file_replaces_shipped_prices_and_a_workflow_replaces_the_file(
    tmp_path: Path,
) -> None:
    # Given a price file that reprices gpt-4o-mini, and a workflow that reprices it again
    path = tmp_path / "prices.json"
    path.write_text(json.dumps({"openai/gpt-4o-mini": {"input": 1.0, "output": 2.0}}))
    table = PriceTable.shipped().merged(read_prices(path))
    tokens = {"input": 1_000_000, "output": 1_000_000}

    # Then the file's price stands over the shipped one, and the workflow's over the file's
    assert table.cost("openai", "gpt-4o-mini", tokens) == 3.0
    workflow = table.merged({"openai/gpt-4o-mini": TokenPrice(input=0.5, output=0.5)})
    assert workflow.cost("openai", "gpt-4o-mini", tokens) == 1.0
    # And a model nobody priced has no cost, rather than a made-up one
    assert table.cost("openai", "gpt-unknown", tokens) is None


def test_cache_tokens_are_priced_at_their_own_rates_else_at_the_input_price() -> None:
    # Given a price with a cache-read rate and none for cache writes
    table = PriceTable({"anthropic/m": TokenPrice(input=3, output=15, cache_read=0.3)})

    # When a call read and wrote the cache
    cost = table.cost("anthropic", "m", {"input": 10, "cache_read": 1000, "cache_write": 100})

    # Then reads cost the read rate and writes the input rate
    assert cost == pytest.approx((10 * 3 + 1000 * 0.3 + 100 * 3) / 1_000_000)


def test_a_price_file_with_a_bad_key_and_a_negative_price_names_both(tmp_path: Path) -> None:
    # Given a YAML price file with a key that names no model and a negative output price
    path = tmp_path / "prices.yaml"
    path.write_text("gpt-4o: {input: 1, output: 2}\nopenai/o1: {input: 1, output: -2}\n")

    # When it is read, then both problems are named with their paths
    with pytest.raises(DefinitionError) as refused:
        read_prices(path)
    paths = [p.path for p in refused.value.problems]
    assert paths == ["gpt-4o", "openai/o1.output"]


def test_a_workflow_price_key_that_names_no_model_is_refused_at_its_path() -> None:
    # Given a workflow whose prices name a key without a provider
    text = FLOW.replace('"offline/priced"', '"priced"')

    # When it is loaded, then the key is refused at prices.<key>
    from langorch.domain.validation import check_workflow

    plan = load_text(text, source="t.yaml", fmt="yaml").workflows[0]
    deps = Fakes()
    register_text(deps, FLOW.split("workflows:")[0])  # type: ignore[arg-type]
    found = check_workflow(plan, deps.definitions, tools=None, providers=None)  # type: ignore[arg-type]
    assert [p.path for p in found.errors] == ["prices.priced"]


def test_parse_prices_refuses_a_document_that_is_not_a_mapping() -> None:
    with pytest.raises(DefinitionError, match="must be a mapping"):
        parse_prices(["openai/gpt-4o"], where="price file x.json")


def test_runs_show_heads_the_run_with_its_cost_and_each_step_line_with_its_own() -> None:
    # Given a priced run that ended
    from langorch.cli.timeline import render_run

    deps = Fakes()
    register_text(deps, FLOW)  # type: ignore[arg-type]
    run_id, timeline = _run(deps)
    run = deps.runs.get_run(run_id)

    # When it is shown
    text = render_run(run, timeline)

    # Then the header says what the run cost and each step's line what the step cost
    assert f"cost ${run.cost_usd:.4f}" in text.splitlines()[1]
    for event in timeline:
        if event.type is TimelineEventType.step_finished:
            line = next(line for line in text.splitlines() if f" {event.step_id} " in line)
            assert f"${event.detail['cost_usd']:.4f}" in line


def test_an_ended_run_emits_its_cost_as_run_cost_by_workflow(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # Given the run-segment function's metric for an ended run of "priced"
    from functions.run_segment import handler

    # When it is emitted
    handler._dollars("RunCost", 0.0123, workflow="priced")

    # Then it is one EMF line: RunCost in the langorch namespace, by service and workflow
    (line,) = [json.loads(x) for x in capsys.readouterr().out.splitlines() if "RunCost" in x]
    directive = line["_aws"]["CloudWatchMetrics"][0]
    assert directive["Namespace"] == "langorch"
    assert directive["Dimensions"] == [["service", "workflow"]]
    assert (line["RunCost"], line["workflow"]) == ([0.0123], "priced")


def test_the_consoles_workflow_page_sums_what_its_latest_runs_cost() -> None:
    # Given two priced runs of a workflow
    from langorch.console.listing import run_cost, workflow_cost

    deps = Fakes()
    register_text(deps, FLOW)  # type: ignore[arg-type]
    first, _ = _run(deps)
    second, _ = _run(deps)
    runs = [deps.runs.get_run(first), deps.runs.get_run(second)]

    # When the workflow page reads its cost
    cost = workflow_cost(deps, "priced")

    # Then it is their sum and average, and each run's row shows its own
    total = sum(r.cost_usd for r in runs)
    assert (cost["runs"], cost["total"]) == (2, f"${total:.4f}")
    assert cost["average"] == f"${total / 2:.4f}"
    assert run_cost(runs[0]) == f"${runs[0].cost_usd:.4f}"
