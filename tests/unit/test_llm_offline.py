"""The offline provider: deterministic answers and scripted answers per block or step."""

from __future__ import annotations

import json
import os
from functools import partial
from pathlib import Path

import pytest

from langorch.domain.errors import LLMError
from langorch.llm import LLMRegistry, OfflineScriptError, is_retryable
from tests.support.llm import an_llm_request

_request = partial(an_llm_request, prompt="Write a post about lunch.")


def test_unscripted_answer_fills_every_key_with_a_value_of_its_type() -> None:
    # Given a block with one output of each type
    request = _request(
        output_keys=["title", "count", "score", "ok", "items", "meta"],
        output_types={
            "count": "integer",
            "score": "number",
            "ok": "boolean",
            "items": "array",
            "meta": "object",
        },
    )

    # When the offline provider answers without a script
    result = LLMRegistry().invoke(request)

    # Then each key holds a deterministic value of its declared type
    assert result.outputs == {
        "title": "title from write_draft",
        "count": 0,
        "score": 0,
        "ok": True,
        "items": [],
        "meta": {},
    }
    assert (result.provider, result.model) == ("offline", "offline")


def test_unscripted_answer_is_the_same_on_every_registry() -> None:
    # Given two independent registries
    first, second = LLMRegistry(), LLMRegistry()

    # When both answer the same request
    # Then the results are identical, token estimates included
    assert first.invoke(_request()) == second.invoke(_request())


def test_unscripted_answer_differs_by_call_index() -> None:
    # Given the same step on its first and its third run in a run (a review loop)
    registry = LLMRegistry()

    # When both calls are answered
    first = registry.invoke(_request(call_index=0)).outputs["title"]
    third = registry.invoke(_request(call_index=2)).outputs["title"]

    # Then later calls are told apart
    assert (first, third) == ("title from write_draft", "title from write_draft (call 3)")


def test_unscripted_step_without_block_uses_the_step_id() -> None:
    # Given an inline step with no block
    # When it is answered
    result = LLMRegistry().invoke(_request(block_id=None))

    # Then values derive from the step id
    assert result.outputs == {"title": "title from draft"}


def test_unscripted_decision_picks_the_first_choice() -> None:
    # Given a decision with two labels
    # When it is answered without a script
    result = LLMRegistry().invoke(_request(output_keys=[], choices=["approve", "revise"]))

    # Then the first label is chosen
    assert result.outputs == {"branch": "approve"}


def test_token_counts_are_an_estimate_from_the_text() -> None:
    # Given a prompt of 100 characters and a system prompt of 20
    request = _request(prompt="x" * 100, system_prompt="y" * 20)

    # When it is answered
    result = LLMRegistry().invoke(request)

    # Then input tokens are about a quarter of the characters
    assert result.input_tokens == 30
    assert result.output_tokens > 0


def test_model_named_by_the_request_is_reported() -> None:
    # When a request names a model
    # Then the offline result reports it
    assert LLMRegistry().invoke(_request(model="claude-ish")).model == "claude-ish"


def test_scripted_sequence_answers_by_call_index_and_repeats_the_last() -> None:
    # Given a script with two answers for a decision block
    registry = LLMRegistry(
        offline_script={
            "check_previous_order": [{"branch": "no_preference"}, {"branch": "has_preference"}]
        }
    )
    labels = ["has_preference", "no_preference"]

    # When the block runs for the first, second and fifth time
    answers = [
        registry.invoke(
            _request(block_id="check_previous_order", output_keys=[], choices=labels, call_index=i)
        ).outputs["branch"]
        for i in (0, 1, 4)
    ]

    # Then the answers follow the sequence and the last one repeats
    assert answers == ["no_preference", "has_preference", "has_preference"]


def test_scripted_answer_for_the_step_id_wins_over_the_block_id() -> None:
    # Given answers for both the block and the step using it
    registry = LLMRegistry(
        offline_script={"write_draft": {"title": "by block"}, "draft": {"title": "by step"}}
    )

    # When the step runs
    # Then the step's answer is used
    assert registry.invoke(_request()).outputs == {"title": "by step"}


def test_scripted_answer_missing_keys_are_filled_and_extra_keys_dropped() -> None:
    # Given a scripted answer with one of two keys and a key the block does not ask for
    registry = LLMRegistry(offline_script={"write_draft": {"title": "Hello", "tittle": "typo"}})

    # When the block runs
    result = registry.invoke(_request(output_keys=["title", "body"]))

    # Then the missing key is filled deterministically and the extra key is dropped
    assert result.outputs == {"title": "Hello", "body": "body from write_draft"}


def test_scripted_raise_fails_the_first_attempts_then_answers() -> None:
    # Given a block scripted to fail twice
    registry = LLMRegistry(
        offline_script={"write_draft": {"raise": "Service unavailable", "times": 2}}
    )

    # When attempts 1 and 2 run
    for attempt in (1, 2):
        with pytest.raises(LLMError, match="Service unavailable") as caught:
            registry.invoke(_request(attempt=attempt))
        # Then each fails with a retryable error
        assert is_retryable(caught.value)

    # And attempt 3 gets the default answer
    assert registry.invoke(_request(attempt=3)).outputs == {"title": "title from write_draft"}


def test_scripted_raise_then_gives_the_answer_after_the_failures() -> None:
    # Given a failure once, then a scripted answer
    registry = LLMRegistry(
        offline_script={"write_draft": {"raise": "boom", "times": 1, "then": {"title": "Later"}}}
    )

    # When the second attempt runs
    # Then it answers with "then"
    assert registry.invoke(_request(attempt=2)).outputs == {"title": "Later"}


def test_scripted_raise_without_times_fails_every_attempt_and_may_be_permanent() -> None:
    # Given a permanent failure
    registry = LLMRegistry(
        offline_script={"write_draft": {"raise": "bad request", "retryable": False}}
    )

    # When the tenth attempt runs
    with pytest.raises(LLMError, match="bad request") as caught:
        registry.invoke(_request(attempt=10))

    # Then it still fails, not retryable
    assert not is_retryable(caught.value)


def test_script_entries_for_unknown_blocks_are_ignored() -> None:
    # Given a script naming a block no request uses
    registry = LLMRegistry(offline_script={"some_other_block": {"title": "x"}})

    # When a different block runs
    # Then it gets the default answer
    assert registry.invoke(_request()).outputs == {"title": "title from write_draft"}


def test_scripted_branch_outside_the_choices_is_an_error() -> None:
    # Given a script whose label is not one of the decision's
    registry = LLMRegistry(offline_script={"write_draft": {"branch": "maybe"}})

    # When the decision runs
    # Then the error lists the allowed labels
    with pytest.raises(LLMError, match="'yes', 'no'"):
        registry.invoke(_request(output_keys=[], choices=["yes", "no"]))


def test_yaml_script_file_is_loaded(tmp_path: Path) -> None:
    # Given a YAML script file
    script = tmp_path / "script.yaml"
    script.write_text("write_draft:\n  - {title: First}\n  - {title: Second}\n")

    # When the block runs twice
    registry = LLMRegistry(offline_script=script)
    titles = [registry.invoke(_request(call_index=i)).outputs["title"] for i in (0, 1)]

    # Then the file's answers are used in order
    assert titles == ["First", "Second"]


def test_json_script_file_is_loaded(tmp_path: Path) -> None:
    # Given a JSON script file
    script = tmp_path / "script.json"
    script.write_text(json.dumps({"write_draft": {"title": "From JSON"}}))

    # When the block runs
    # Then the file's answer is used
    assert LLMRegistry(offline_script=str(script)).invoke(_request()).outputs == {
        "title": "From JSON"
    }


def test_script_file_is_read_again_when_it_changes(tmp_path: Path) -> None:
    # Given a registry built on a script file
    script = tmp_path / "script.yaml"
    script.write_text("write_draft: {title: Old}\n")
    registry = LLMRegistry(offline_script=script)

    # When the file is edited (with a later modification time)
    script.write_text("write_draft: {title: New}\n")
    stat = script.stat()
    os.utime(script, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000_000))

    # Then the next call uses the new answer
    assert registry.invoke(_request()).outputs == {"title": "New"}


def test_script_problems_are_reported_together_with_file_and_path(tmp_path: Path) -> None:
    # Given a script with three mistakes
    script = tmp_path / "bad.yaml"
    script.write_text(
        "a: just text\nb: []\nc:\n  - {title: ok}\n  - {raise: boom, times: 0, title: x}\n"
    )

    # When the registry loads it
    with pytest.raises(OfflineScriptError) as caught:
        LLMRegistry(offline_script=script)

    # Then every problem is reported with the file and where it is
    message = str(caught.value)
    assert str(script) in message
    assert "a: must be an answer (mapping) or a list of answers, not a str" in message
    assert "b: an empty list has no answer to give" in message
    assert "c[1].times: must be a whole number >= 1, not 0" in message
    assert "c[1].title: unexpected beside 'raise'" in message


def test_script_file_that_does_not_parse_is_reported_with_its_path(tmp_path: Path) -> None:
    # Given a JSON file with a syntax error
    script = tmp_path / "broken.json"
    script.write_text("{not json")

    # When the registry loads it
    # Then the error names the file and says it does not parse
    with pytest.raises(OfflineScriptError, match=r"(?s)broken\.json.*does not parse"):
        LLMRegistry(offline_script=script)


def test_missing_script_file_is_reported_with_its_path(tmp_path: Path) -> None:
    # Given a path with no file
    # When the registry loads it
    # Then the error names the file
    with pytest.raises(OfflineScriptError, match=r"(?s)nope\.yaml.*cannot be read"):
        LLMRegistry(offline_script=tmp_path / "nope.yaml")


def test_a_script_may_list_tool_calls_beside_the_answer() -> None:
    from langorch.llm.offline import ScriptedToolCall, parse_script

    script = parse_script(
        {
            "look": {
                "tool_calls": [
                    {"tool": "calculator", "args": {"expression": "1+1"}, "result_key": "total"}
                ],
                "note": "done",
            }
        }
    )
    (answer,) = script["look"]
    assert answer.tool_calls == (ScriptedToolCall("calculator", {"expression": "1+1"}, "total"),)
    assert answer.outputs == {"note": "done"}


def test_badly_shaped_tool_calls_are_reported_with_their_paths() -> None:
    from langorch.llm.offline import OfflineScriptError, parse_script

    with pytest.raises(OfflineScriptError) as caught:
        parse_script({"look": {"tool_calls": [{"args": {}}, {"tool": "x", "args": [1], "to": 1}]}})
    paths = [p.path for p in caught.value.problems]
    assert paths == ["look.tool_calls[0]", "look.tool_calls[1].to", "look.tool_calls[1].args"]
