"""The built-in blocks shipped with langorch."""

from __future__ import annotations

import json
from importlib import resources

import pytest
import yaml

from langorch.domain.builtins import builtin_block_ids, builtin_blocks
from langorch.domain.definitions import BlockType
from langorch.domain.validation import validate_block

EXPECTED = {
    "query_memory": BlockType.query_memory,
    "save_memory": BlockType.save_memory,
    "query_history": BlockType.query_memory,
    "save_preferences": BlockType.save_memory,
    "http_request": BlockType.http,
    "wait_for": BlockType.wait,
    "summarize": BlockType.action,
    "classify": BlockType.decision,
    "approve": BlockType.approval,
}


def test_every_expected_builtin_block_is_shipped_with_its_kind() -> None:
    kinds = {b.block_id: b.block_type for b in builtin_blocks()}
    assert {k: kinds.get(k) for k in EXPECTED} == EXPECTED


@pytest.mark.parametrize("block_id", sorted(EXPECTED))
def test_builtin_block_is_valid(block_id: str) -> None:
    [block] = [b for b in builtin_blocks() if b.block_id == block_id]
    assert validate_block(block, tools=frozenset(), providers=frozenset()) == []


def test_query_memory_is_seed_000s_block() -> None:
    [block] = [b for b in builtin_blocks() if b.block_id == "query_memory"]
    assert (block.input_keys, block.output_keys) == (["memory_query"], ["memory_results"])
    assert block.memory is not None and block.memory.scope == "preferences"


def test_http_request_has_a_templated_url() -> None:
    [block] = [b for b in builtin_blocks() if b.block_id == "http_request"]
    assert block.http is not None and "{{ url }}" in block.http.url


def test_summarize_writes_a_summary() -> None:
    [block] = [b for b in builtin_blocks() if b.block_id == "summarize"]
    assert block.output_keys == ["summary"]


def test_builtin_blocks_are_fresh_copies() -> None:
    first = builtin_blocks()
    first[0].tags.append("changed")
    assert "changed" not in builtin_blocks()[0].tags


def test_builtin_block_ids_match_the_blocks() -> None:
    assert builtin_block_ids() == {b.block_id for b in builtin_blocks()}


def test_the_json_read_at_run_time_is_the_yaml_written_by_hand() -> None:
    # Given the packaged built-ins: blocks.yaml (edited) and blocks.json (read, generated from it)
    folder = resources.files("langorch").joinpath("builtins")
    written = yaml.safe_load(folder.joinpath("blocks.yaml").read_text(encoding="utf-8"))

    # When the generated file is read
    read = json.loads(folder.joinpath("blocks.json").read_text(encoding="utf-8"))

    # Then both hold the same blocks (else regenerate blocks.json: see blocks.yaml's header)
    assert read == written
