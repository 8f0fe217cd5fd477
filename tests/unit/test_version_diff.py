"""Comparing two workflow versions against a run's state (pure domain, no AWS)."""

from __future__ import annotations

from typing import Any

from langorch.domain.definitions import BlockDefinition, TaskPlan
from langorch.domain.loading import load_text
from langorch.domain.version_diff import VersionDiff, compare_versions

BLOCKS = """
blocks:
  - {block_id: draft, input_keys: [topic], output_keys: [text], prompt_template: "On {{ topic }}"}
  - block_id: polish
    input_keys: [text, tone]
    output_keys: [final]
    prompt_template: "{{ text }} {{ tone }}"
"""


class Lookup:
    def __init__(self, blocks: list[BlockDefinition]) -> None:
        self.blocks = {b.block_id: b for b in blocks}

    def get_block(self, block_id: str, version: int | None = None) -> BlockDefinition | None:
        return self.blocks.get(block_id)

    def get_workflow(self, workflow_id: str, version: int | None = None) -> TaskPlan | None:
        return None


def plan(version: int, steps: str) -> TaskPlan:
    text = f"""
workflows:
  - plan_id: post
    version: {version}
    memory: false
    inputs_schema: {{properties: {{topic: {{type: string}}, tone: {{type: string}}}}}}
    steps:
{steps}
"""
    [loaded] = load_text(text, source="t.yaml", fmt="yaml").workflows
    return loaded


LOOKUP = Lookup(list(load_text(BLOCKS, source="b.yaml", fmt="yaml").blocks))
V1 = plan(
    1,
    """      - {step_id: draft, block_id: draft}
      - {step_id: shout, kind: transform, depends_on: [draft], transform: {loud: "text"}}""",
)


def blocks(p: TaskPlan) -> dict[str, BlockDefinition | None]:
    return {s.step_id: LOOKUP.get_block(s.block_id) if s.block_id else None for s in p.steps}


def from_v1(v2: TaskPlan, *, state: dict[str, Any], remaining: list[str]) -> VersionDiff:
    """V1 compared with ``v2`` for a run at ``state`` with ``remaining`` steps still to run."""
    return compare_versions(
        V1, blocks(V1), v2, blocks(v2), state=state, remaining=remaining, lookup=LOOKUP
    )


def test_steps_added_removed_and_changed_are_named() -> None:
    v2 = plan(
        2,
        """      - {step_id: draft, block_id: draft}
      - {step_id: whisper, kind: transform, depends_on: [draft], transform: {quiet: "text"}}""",
    )
    diff = from_v1(v2, state={"text": "x"}, remaining=["whisper"])
    assert (diff.added, diff.removed, diff.changed) == (("whisper",), ("shout",), ())
    assert diff.compatible


def test_a_changed_step_is_seen_and_the_same_content_is_no_change() -> None:
    same = plan(
        2,
        """      - {step_id: draft, block_id: draft}
      - {step_id: shout, kind: transform, depends_on: [draft], transform: {loud: "text"}}""",
    )
    changed = plan(
        3,
        """      - {step_id: draft, block_id: draft}
      - {step_id: shout, kind: transform, depends_on: [draft], transform: {loud: "text ~ '!'"}}""",
    )
    kept = from_v1(same, state={}, remaining=[])
    moved = from_v1(changed, state={}, remaining=[])
    assert kept.changed == () and moved.changed == ("shout",)


def test_a_key_a_remaining_step_reads_and_the_state_lacks_is_a_problem_with_its_path() -> None:
    v2 = plan(
        2,
        """      - {step_id: draft, block_id: draft}
      - {step_id: polish, block_id: polish, depends_on: [draft]}""",
    )
    diff = from_v1(v2, state={"topic": "t"}, remaining=["draft", "polish"])
    # draft will provide text; nothing provides tone
    [problem] = diff.problems
    assert problem.path == "steps[1].block_id" and "'tone'" in problem.message
    assert "--set tone=JSON" in problem.hint
    assert not diff.compatible


def test_a_step_due_at_the_redrive_point_that_the_new_version_removed_is_a_problem() -> None:
    v2 = plan(2, """      - {step_id: draft, block_id: draft}""")
    diff = from_v1(v2, state={"text": "x"}, remaining=["shout"])
    assert [p.path for p in diff.problems] == ["steps.shout"]


def test_a_remaining_step_reading_an_earlier_steps_result_is_no_problem() -> None:
    # Given a new version whose second step reads the first's result by its id
    v2 = plan(
        2,
        """      - {step_id: draft, block_id: draft}
      - {step_id: shout, kind: transform, depends_on: [draft], transform: {loud: "draft.text"}}""",
    )
    # When both are still to run
    diff = from_v1(v2, state={"topic": "t"}, remaining=["draft", "shout"])
    # Then draft's result will be there for shout
    assert diff.problems == ()
