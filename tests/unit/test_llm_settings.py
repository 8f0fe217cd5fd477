"""LLM settings in definitions and Settings: validated with paths, hash-neutral when unset."""

from __future__ import annotations

import hashlib
import json

import pytest

from langorch.config import Settings
from langorch.domain.definitions import BlockDefinition, PlanStep, TaskPlan
from langorch.domain.errors import DefinitionError
from langorch.domain.loading import load_text


def _hash(data: dict[str, object]) -> str:
    canonical = json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(canonical.encode()).hexdigest()


def test_bad_llm_settings_are_reported_with_their_paths() -> None:
    # Given a block with max_tokens 0 and a workflow with temperature 3
    text = """
blocks:
  - {block_id: b, output_keys: [x], prompt_template: "p", max_tokens: 0}
workflows:
  - plan_id: w
    llm_temperature: 3
    llm_max_tokens: -5
    steps: [{step_id: s, block_id: b}]
"""
    # When the file is loaded
    with pytest.raises(DefinitionError) as caught:
        load_text(text, source="t.yaml", fmt="yaml")

    # Then each problem names its field
    paths = {problem.path for problem in caught.value.problems}  # type: ignore[attr-defined]
    assert paths == {
        "blocks[0].max_tokens",
        "workflows[0].llm_temperature",
        "workflows[0].llm_max_tokens",
    }


def test_new_llm_fields_leave_stored_content_hashes_unchanged_while_unset() -> None:
    # Given a block and a workflow as stored before max_tokens / llm_temperature existed
    block = BlockDefinition(block_id="b", output_keys=["x"], prompt_template="p")
    plan = TaskPlan(plan_id="w", steps=[PlanStep(step_id="s", block_id="b")])
    old_block = block.model_dump(
        mode="json", exclude={"version", "max_tokens", "max_prompt_chars", "read_file"}
    )
    old_plan = plan.model_dump(
        mode="json", exclude={"version", "llm_temperature", "llm_max_tokens"}
    )
    old_plan["steps"] = [
        {k: v for k, v in step.items() if k != "read_file"} for step in old_plan["steps"]
    ]

    # Then their hashes are what they were; setting a field makes a new version
    assert block.content_hash() == _hash(old_block)
    assert plan.content_hash() == _hash(old_plan)
    assert block.model_copy(update={"max_tokens": 100}).content_hash() != block.content_hash()
    assert plan.model_copy(update={"llm_temperature": 0.1}).content_hash() != plan.content_hash()


@pytest.mark.parametrize(
    ("standard", "ours", "field"),
    [
        pytest.param("OPENAI_API_KEY", "LANGORCH_OPENAI_API_KEY", "openai_api_key", id="openai"),
        pytest.param(
            "ANTHROPIC_API_KEY", "LANGORCH_ANTHROPIC_API_KEY", "anthropic_api_key", id="anthropic"
        ),
    ],
)
def test_a_provider_key_is_read_from_either_variable_langorch_first(
    standard: str, ours: str, field: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given the provider's standard variable only
    monkeypatch.setenv(standard, "sk-standard")
    assert getattr(Settings(), field) == "sk-standard"

    # When langorch's own is set too, it wins; neither shows in the settings' repr
    monkeypatch.setenv(ours, "sk-langorch")
    assert getattr(Settings(), field) == "sk-langorch"
    assert "sk-standard" not in repr(Settings()) and "sk-langorch" not in repr(Settings())


def test_the_key_never_shows_in_the_settings_repr() -> None:
    assert "sk-secret" not in repr(Settings(openai_api_key="sk-secret"))


@pytest.mark.parametrize(
    ("default_provider", "secret", "openai", "anthropic"),
    [
        ("openai", {"api_key": "sk-o"}, "sk-o", None),
        ("anthropic", {"api_key": "sk-a"}, "sk-a", "sk-a"),
        ("bedrock", {"openai_api_key": "sk-o", "anthropic_api_key": "sk-a"}, "sk-o", "sk-a"),
    ],
)
def test_a_deployments_llm_secret_gives_each_provider_its_key(
    default_provider: str, secret: dict[str, str], openai: str | None, anthropic: str | None
) -> None:
    # Given a deployment whose LLM secret holds keys, and no key in its environment
    from langorch.composition.container import Container
    from tests.fakes.secrets import InMemorySecrets

    settings = Settings(
        llm_api_key_secret="langorch/llm",
        default_llm_provider=default_provider,
        openai_api_key=None,
        anthropic_api_key=None,
    )
    container = Container(settings)
    container.__dict__["secrets"] = InMemorySecrets({"langorch/llm": secret})
    # When each provider reads its key, then it gets its own (api_key: OpenAI's, or the default
    # provider's)
    assert (container._openai_key(), container._anthropic_key()) == (openai, anthropic)
