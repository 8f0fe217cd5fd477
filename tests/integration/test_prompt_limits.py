"""A prompt's length limit in a run: the provider's default, a block's own, and the error."""

from __future__ import annotations

from langorch.domain.templates import MAX_RENDERED_CHARS
from tests.integration.conftest import MakeContainer, register_text, run_to_end

TEXT = "x" * 10_000  # small in the run's input; the prompt repeats it

DEFINITIONS = """
blocks:
  - {block_id: digest, name: Digest, input_keys: [text], output_keys: [summary],
     prompt_template: "Summarize: {% for _ in range(25) %}{{ text }}{% endfor %}",
     llm_provider: offline, max_retries: 0}
  - {block_id: tight, name: Tight, input_keys: [text], output_keys: [summary],
     prompt_template: "Summarize: {text}", llm_provider: offline, max_retries: 0,
     max_prompt_chars: 10000}
workflows:
  - plan_id: long_digest
    memory: false
    inputs_schema: {properties: {text: {type: string}}, required: [text]}
    steps: [{step_id: digest, block_id: digest}]
  - plan_id: tight_digest
    memory: false
    inputs_schema: {properties: {text: {type: string}}, required: [text]}
    steps: [{step_id: digest, block_id: tight}]
"""


def test_a_prompt_past_the_old_200k_cap_runs_within_its_providers_limit(
    make_embedded: MakeContainer,
):
    container = make_embedded()
    register_text(container, DEFINITIONS)

    result = run_to_end(container, "long_digest", {"text": TEXT})

    # 250,000 characters: past the old fixed cap, well within today's context windows
    assert 25 * len(TEXT) > MAX_RENDERED_CHARS
    assert result.status == "succeeded", container.runs.get_run(result.run_id).error


def test_a_blocks_own_limit_fails_the_step_saying_how_to_raise_it(make_embedded: MakeContainer):
    container = make_embedded()
    register_text(container, DEFINITIONS)

    result = run_to_end(container, "tight_digest", {"text": TEXT + TEXT})

    error = container.runs.get_run(result.run_id).error
    assert result.status == "failed"
    assert error is not None
    assert "more than the 10,000 allowed" in error.message
    assert "max_prompt_chars" in error.message
