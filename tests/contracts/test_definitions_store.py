"""Contract of the definitions store (``DefinitionsStore`` + ``WorkflowSource``): the DynamoDB
adapter on moto, the local SQLite store and the in-memory fake — immutable versions, no-op
re-registration, lookups, drafts and promotions of the active version, and concurrent writers
of changed content never sharing a version nor losing a promotion.
Every stored workflow with its latest and active versions (``stored_workflows``, what the CLI
and the console list) is all three's; the rest of the metadata (``get_stored``, ``versions``,
``list_stored``, searches) is the two adapters' (the fake has none)."""

from __future__ import annotations

import multiprocessing
import threading
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from langorch.adapters.dynamodb.definitions import DefinitionsRepository
from langorch.adapters.sqlite._db import Database
from langorch.adapters.sqlite.definitions import SqliteDefinitions
from langorch.domain.definitions import BlockDefinition, PlanStep, TaskPlan
from langorch.domain.errors import NotFoundError
from langorch.domain.promotions import Gate, Promotion
from tests.fakes import InMemoryDefinitions

CREATED_AT = datetime(2025, 1, 2, 3, 4, 5, tzinfo=UTC)
WRITERS = 4
"""Concurrent writers in the race tests: fewer than the DynamoDB adapter's five attempts, so
every writer stores its version however often it loses."""

Store = DefinitionsRepository | InMemoryDefinitions | SqliteDefinitions
Repository = DefinitionsRepository | SqliteDefinitions


@pytest.fixture(params=["fake", "sqlite", "dynamodb"])
def store(request: pytest.FixtureRequest) -> Store:
    if request.param == "fake":
        return InMemoryDefinitions()
    return _repository(request)


@pytest.fixture(params=["sqlite", "dynamodb"])
def repo(request: pytest.FixtureRequest) -> Repository:
    return _repository(request)


def _repository(request: pytest.FixtureRequest) -> Repository:
    def clock() -> datetime:
        return CREATED_AT

    if request.param == "sqlite":
        return SqliteDefinitions(request.getfixturevalue("sqlite_db"), clock=clock)
    repository = DefinitionsRepository(
        request.getfixturevalue("dynamodb"), "definitions", clock=clock
    )
    repository.create_table()
    return repository


def _block(block_id: str = "summarize", **changes: Any) -> BlockDefinition:
    fields: dict[str, Any] = {
        "block_id": block_id,
        "input_keys": ["text"],
        "output_keys": ["summary"],
        "prompt_template": "Summarize: {{ text }}",
        **changes,
    }
    return BlockDefinition(**fields)


def _plan(plan_id: str = "digest", **changes: Any) -> TaskPlan:
    fields: dict[str, Any] = {
        "plan_id": plan_id,
        "steps": [PlanStep(step_id="summarize", block_id="summarize")],
        **changes,
    }
    return TaskPlan(**fields)


def test_the_first_put_is_version_1_and_new(store: Store) -> None:
    stored, new = store.put_workflow(_plan())
    assert (stored.version, new) == (1, True)
    assert store.get_workflow("digest") == stored


def test_identical_content_again_is_the_same_version_and_not_new(store: Store) -> None:
    first, _ = store.put_block(_block())
    again, new = store.put_block(_block())
    assert (again.version, new) == (first.version, False)


def test_changed_content_adds_a_version_and_keeps_the_old_one(store: Store) -> None:
    store.put_workflow(_plan(description="one"))
    second, new = store.put_workflow(_plan(description="two"))
    assert (second.version, new) == (2, True)
    old = store.get_workflow("digest", 1)
    assert old is not None and old.description == "one"
    latest = store.get_workflow("digest")
    assert latest is not None and latest.description == "two"


def test_absent_definitions_read_as_none(store: Store) -> None:
    store.put_workflow(_plan())
    assert store.get_workflow("nope") is None
    assert store.get_workflow("digest", 9) is None
    assert store.get_block("nope") is None


def test_a_block_and_a_workflow_of_one_id_are_apart(store: Store) -> None:
    # Given a block and a workflow that share an id
    store.put_block(_block("digest"))
    # When the workflow is stored
    plan, new = store.put_workflow(_plan("digest"))
    # Then it starts its own versions, and the block is still read as a block
    assert (plan.version, new) == (1, True)
    block = store.get_block("digest")
    assert block is not None and block.block_id == "digest"


def test_listing_gives_the_latest_version_of_each_workflow_by_id(store: Store) -> None:
    store.put_workflow(_plan("b"))
    store.put_workflow(_plan("a", description="one"))
    store.put_workflow(_plan("a", description="two"))
    assert [(p.plan_id, p.version) for p in store.list_workflows()] == [("a", 2), ("b", 1)]


# --- the active version: drafts and promotions ----------------------------------------------


def _promotion(version: int, *, by: str = "ana", gate: Gate | None = None) -> Promotion:
    return Promotion("digest", version, None, by, CREATED_AT, gate=gate, forced=False)


def test_a_draft_is_stored_but_runs_still_get_the_active_version(store: Store) -> None:
    # Given a workflow, and a changed version of it stored as a draft
    store.put_workflow(_plan(description="one"))
    draft, new = store.put_workflow(_plan(description="two"), activate=False)
    # Then the draft is a new version, readable by number, but not the active one
    assert (draft.version, new) == (2, True)
    assert store.get_workflow("digest", 2) == draft
    active = store.get_workflow("digest")
    assert active is not None and active.version == 1
    assert [p.version for p in store.list_workflows()] == [1]


def test_a_workflow_stored_only_as_a_draft_has_no_active_version(store: Store) -> None:
    # Given a workflow whose only version is a draft
    store.put_workflow(_plan(), activate=False)
    # Then nothing starts it: it is neither read as active nor listed
    assert store.get_workflow("digest") is None
    assert store.get_workflow("digest", 1) is not None
    assert store.list_workflows() == []


def test_stored_workflows_list_every_workflow_with_its_latest_and_active_versions(
    store: Store,
) -> None:
    # Given a workflow stored only as a draft, one with a draft newer than its active version,
    # and one whose latest version is active
    store.put_workflow(_plan("drafted"), activate=False)
    store.put_workflow(_plan("digest", description="one"))
    store.put_workflow(_plan("digest", description="two"), activate=False)
    store.put_workflow(_plan("active"))

    # When every stored workflow is listed
    listed = store.stored_workflows()

    # Then each is there, by id, with its latest version and its active one (none for drafts)
    assert [(s.id, s.version, s.active_version) for s in listed] == [
        ("active", 1, 1),
        ("digest", 2, 1),
        ("drafted", 1, None),
    ]
    assert [s.definition.version for s in listed] == [1, 2, 1]
    assert listed[1].definition.description == "two"
    assert all(s.content_hash == s.definition.content_hash() for s in listed)


def test_a_promotion_activates_the_version_and_keeps_its_record(store: Store) -> None:
    # Given an active version 1 and a draft version 2
    store.put_workflow(_plan(description="one"))
    store.put_workflow(_plan(description="two"), activate=False)
    gate = Gate("replay.json", runs=20, failures=0, passed=True, fail_on=("path",))
    # When version 2 is promoted with a gate
    recorded = store.promote(_promotion(2, gate=gate))
    # Then it is active, and the record says what it replaced, who, when and the gate
    active = store.get_workflow("digest")
    assert active is not None and active.version == 2
    assert recorded == Promotion("digest", 2, 1, "ana", CREATED_AT, gate=gate)
    assert store.promotions("digest") == [recorded]


def test_promotions_are_kept_oldest_first(store: Store) -> None:
    # Given two versions, promoted back and forth
    store.put_workflow(_plan(description="one"))
    store.put_workflow(_plan(description="two"))
    store.promote(_promotion(1, by="ana"))
    store.promote(_promotion(2, by="bo"))
    # Then both promotions are kept in order, each with the version it replaced
    history = [(p.version, p.previous_version, p.promoted_by) for p in store.promotions("digest")]
    assert history == [(1, 2, "ana"), (2, 1, "bo")]
    assert store.promotions("nope") == []


def test_a_draft_after_a_promotion_keeps_the_promoted_version_active(store: Store) -> None:
    # Given version 2 stored, and version 1 promoted back (a rollback)
    store.put_workflow(_plan(description="one"))
    store.put_workflow(_plan(description="two"))
    store.promote(_promotion(1))
    # When a third version is put as a draft, then a fourth as active
    store.put_workflow(_plan(description="three"), activate=False)
    kept = store.get_workflow("digest")
    store.put_workflow(_plan(description="four"))
    # Then the draft left version 1 active, and the plain put made version 4 active
    assert kept is not None and kept.version == 1
    latest = store.get_workflow("digest")
    assert latest is not None and latest.version == 4


def test_promoting_a_version_that_does_not_exist_is_not_found(store: Store) -> None:
    # Given one stored version
    store.put_workflow(_plan())
    # When version 2, or an unknown workflow, is promoted
    # Then both are refused and nothing is recorded
    with pytest.raises(NotFoundError, match="digest@2"):
        store.promote(_promotion(2))
    with pytest.raises(NotFoundError):
        store.promote(Promotion("nope", 1, None, "ana", CREATED_AT))
    assert store.promotions("digest") == []


def test_listing_says_the_latest_and_the_active_version(repo: Repository) -> None:
    # Given an active version 1 and a draft version 2
    repo.put_workflow(_plan(description="one"))
    repo.put_workflow(_plan(description="two"), activate=False)
    # When the workflows are listed, and the active one read with its metadata
    [listed] = repo.list_stored("workflow")
    active = repo.get_stored("workflow", "digest")
    # Then the listing is at the latest version and names the active one
    assert (listed.version, listed.active_version) == (2, 1)
    assert active is not None and (active.version, active.active_version) == (1, 1)
    assert repo.latest_version("workflow", "digest") == 2


# --- versions and their metadata (the CLI's `show`, the console's history) ----------------


def test_a_version_is_read_with_its_own_hash_and_creation_time(repo: Repository) -> None:
    # Given two versions of a workflow
    repo.put_workflow(_plan())
    repo.put_workflow(_plan(description="second"))
    # When version 1 is read with its metadata
    stored = repo.get_stored("workflow", "digest", 1)
    # Then it carries that version's hash and the clock's time
    assert stored is not None
    assert (stored.kind, stored.id, stored.version) == ("workflow", "digest", 1)
    assert stored.content_hash == _plan().content_hash()
    assert stored.created_at == CREATED_AT


def test_without_a_version_the_metadata_is_the_latest(repo: Repository) -> None:
    # Given two versions of a block
    repo.put_block(_block())
    repo.put_block(_block(description="second"))
    # When it is read without a version
    stored = repo.get_stored("block", "summarize")
    # Then that is version 2, and an unknown id is None
    assert stored is not None and stored.version == 2
    assert stored.content_hash == _block(description="second").content_hash()
    assert repo.get_stored("block", "nope") is None


def test_versions_are_every_version_oldest_first(repo: Repository) -> None:
    # Given a block stored three times, once with content it already had
    repo.put_block(_block(description="one"))
    repo.put_block(_block(description="two"))
    repo.put_block(_block(description="two"))
    # When its versions are read
    versions = repo.versions("block", "summarize")
    # Then there are two, oldest first, and an unknown id has none
    assert [(v.version, v.definition.description) for v in versions] == [(1, "one"), (2, "two")]
    assert repo.versions("block", "nope") == []


def test_list_stored_gives_the_latest_of_each_kind_by_id(repo: Repository) -> None:
    # Given two blocks, one of them changed, and a workflow
    repo.put_block(_block("b"))
    repo.put_block(_block("a"))
    repo.put_block(_block("a", description="changed"))
    repo.put_workflow(_plan())
    # When the blocks are listed with their metadata
    listed = repo.list_stored("block")
    # Then each block appears once, at its latest version, and no workflow is among them
    assert [(s.kind, s.id, s.version) for s in listed] == [("block", "a", 2), ("block", "b", 1)]


def test_search_by_category(repo: Repository) -> None:
    # Given blocks in two categories
    repo.put_block(_block("a", category="text"))
    repo.put_block(_block("b", category="mail"))
    # When searching one category
    found = repo.search_blocks(category="text")
    # Then only that category's blocks come back
    assert [b.block_id for b in found] == ["a"]


def test_search_by_tags_requires_every_tag(repo: Repository) -> None:
    # Given blocks with overlapping tags
    repo.put_block(_block("a", tags=["llm", "summary"]))
    repo.put_block(_block("b", tags=["llm"]))
    repo.put_block(_block("c", tags=["summary", "llm", "fast"]))
    # When searching for two tags
    found = repo.search_blocks(tags=["llm", "summary"])
    # Then only blocks carrying both match
    assert [b.block_id for b in found] == ["a", "c"]


def test_search_uses_the_latest_version_only(repo: Repository) -> None:
    # Given a block whose tag was removed in version 2
    repo.put_block(_block("a", tags=["old"]))
    repo.put_block(_block("a", tags=[]))
    # When searching the old tag
    # Then the block no longer matches
    assert repo.search_blocks(tags=["old"]) == []


def test_workflows_are_listed_by_category_and_tags_too(repo: Repository) -> None:
    # Given workflows in a category, one of them tagged
    repo.put_workflow(_plan("a", category="ops", tags=["daily"]))
    repo.put_workflow(_plan("b", category="ops"))
    repo.put_workflow(_plan("c"))
    # When listing the category's workflows carrying the tag
    listed = repo.list_stored("workflow", category="ops", tags=["daily"])
    # Then only the tagged one in the category matches
    assert [s.id for s in listed] == ["a"]


def test_the_bodies_listing_is_the_stored_listing_unparsed(repo: Repository) -> None:
    # Given two workflows, one with an active version 1 and a newer draft
    repo.put_workflow(_plan("b", description="one"))
    repo.put_workflow(_plan("b", description="two"), activate=False)
    repo.put_workflow(_plan("a", tags=["daily"]))
    # When the workflows are listed as stored JSON, and as definitions
    bodies = repo.list_bodies("workflow")
    stored = repo.list_stored("workflow")
    # Then both list the same versions with the same metadata, each body the definition's JSON
    assert [
        (b.kind, b.id, b.version, b.active_version, b.content_hash, b.created_at, b.body)
        for b in bodies
    ] == [
        (
            s.kind,
            s.id,
            s.version,
            s.active_version,
            s.content_hash,
            s.created_at,
            s.definition.model_dump(mode="json"),
        )
        for s in stored
    ]
    assert [(b.id, b.version, b.active_version) for b in bodies] == [("a", 1, 1), ("b", 2, 1)]


def test_the_bodies_listing_filters_by_category_and_tags_as_the_stored_one(
    repo: Repository,
) -> None:
    # Given blocks in two categories, with overlapping tags
    repo.put_block(_block("a", category="text", tags=["llm", "summary"]))
    repo.put_block(_block("b", category="text", tags=["llm"]))
    repo.put_block(_block("c", category="mail", tags=["llm", "summary"]))
    # When the category's blocks carrying both tags are listed as stored JSON
    listed = repo.list_bodies("block", category="text", tags=["llm", "summary"])
    # Then only the one matching both filters comes back, at its version
    assert [(b.kind, b.id, b.version, b.body["category"]) for b in listed] == [
        ("block", "a", 1, "text")
    ]


# --- concurrent writers ---------------------------------------------------------------------


@pytest.fixture(params=["sqlite", "dynamodb"])
def shared_repo(request: pytest.FixtureRequest) -> Repository:
    """A store threads may share (moto's requests atomic, as DynamoDB's are: the ``dynamodb``
    fixture's client)."""
    return _repository(request)


@pytest.mark.slow
def test_concurrent_puts_of_changed_content_never_share_a_version(shared_repo: Repository) -> None:
    # Given a stored block, and writers that each hold changed content of it
    shared_repo.put_block(_block())
    barrier = threading.Barrier(WRITERS)
    stored: list[tuple[int, bool]] = []

    def put(writer: int) -> None:
        barrier.wait()
        block, created = shared_repo.put_block(_block(description=f"writer {writer}"))
        stored.append((block.version, created))

    # When they all put at once
    threads = [threading.Thread(target=put, args=(n,)) for n in range(WRITERS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    # Then each got its own next version, and every content is kept under the one it got
    assert sorted(stored) == [(version, True) for version in range(2, WRITERS + 2)]
    kept = {v.version: v.definition.description for v in shared_repo.versions("block", "summarize")}
    assert sorted(kept.values()) == sorted(["", *(f"writer {n}" for n in range(WRITERS))])


@pytest.mark.slow
def test_concurrent_promotions_and_drafts_lose_no_promotion(shared_repo: Repository) -> None:
    # Given versions 1..3 of a workflow (3 active), and writers that each promote one of them
    # while others store drafts
    for n in range(3):
        shared_repo.put_workflow(_plan(description=f"v{n + 1}"))
    barrier = threading.Barrier(WRITERS)

    def write(writer: int) -> None:
        barrier.wait()
        if writer % 2:
            shared_repo.put_workflow(_plan(description=f"draft {writer}"), activate=False)
        else:
            shared_repo.promote(_promotion(1 + writer // 2, by=f"writer {writer}"))

    # When they all write at once
    threads = [threading.Thread(target=write, args=(n,)) for n in range(WRITERS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    # Then every promotion is recorded, each replacing the one before it, the last one is
    # active (no draft undid it), and every draft is a version of its own
    history = shared_repo.promotions("digest")
    assert len(history) == WRITERS // 2
    chain = [3, *(p.version for p in history)]
    assert [p.previous_version for p in history] == chain[:-1]
    active = shared_repo.get_workflow("digest")
    assert active is not None and active.version == history[-1].version
    assert shared_repo.latest_version("workflow", "digest") == 3 + WRITERS // 2


def test_a_head_from_before_drafts_reads_its_latest_as_active(dynamodb: Any) -> None:
    # Given a workflow whose head item was written before heads had an active version
    repository = DefinitionsRepository(dynamodb, "definitions", clock=lambda: CREATED_AT)
    repository.create_table()
    repository.put_workflow(_plan(description="one"))
    repository.put_workflow(_plan(description="two"))
    dynamodb.update_item(
        TableName="definitions",
        Key={"pk": {"S": "workflow#digest"}, "sk": {"S": "head"}},
        UpdateExpression="REMOVE active, revision",
    )
    # When it is read, a draft is stored, and version 1 promoted
    before = repository.get_workflow("digest")
    repository.put_workflow(_plan(description="three"), activate=False)
    during = repository.get_workflow("digest")
    recorded = repository.promote(_promotion(1))
    # Then its latest was active, the draft kept it so, and the promotion replaced it
    assert before is not None and before.version == 2
    assert during is not None and during.version == 2
    assert recorded.previous_version == 2
    active = repository.get_workflow("digest")
    assert active is not None and active.version == 1


def _put_in_own_process(path: str, writer: int, barrier: Any) -> None:
    """One writer process: its own ``Database`` on the shared file, one put of changed content."""
    repository = SqliteDefinitions(Database(path))
    barrier.wait()
    repository.put_block(_block(description=f"process {writer}"))


@pytest.mark.slow
def test_processes_with_their_own_database_never_share_a_version(tmp_path: Path) -> None:
    # Given a stored block in a file, and processes that each open the file themselves
    path = str(tmp_path / "langorch.db")
    db = Database(path)
    SqliteDefinitions(db).put_block(_block())
    db.close()  # an SQLite connection must not cross a fork
    # Forked, not spawned: a spawned child imports langorch again (seconds per process).
    fork = multiprocessing.get_context("fork")
    barrier = fork.Barrier(WRITERS)
    processes = [
        fork.Process(target=_put_in_own_process, args=(path, n, barrier)) for n in range(WRITERS)
    ]
    # When they all put changed content at once
    for process in processes:
        process.start()
    for process in processes:
        process.join()
    # Then every process succeeded, and each content is one version of its own
    assert [p.exitcode for p in processes] == [0] * WRITERS
    versions = SqliteDefinitions(Database(path)).versions("block", "summarize")
    assert [v.version for v in versions] == list(range(1, WRITERS + 2))
    assert sorted(v.definition.description for v in versions) == sorted(
        ["", *(f"process {n}" for n in range(WRITERS))]
    )
