"""Contract of the memory port (a LangGraph ``BaseStore`` as ``MemoryManager`` uses it): the
DynamoDB store on moto, the local stack's SQLite store and ``InMemoryStore`` pass the same tests;
preferences and history also survive across processes that share only DynamoDB (or the SQLite
file), and read back the same numbers from either."""

from __future__ import annotations

import asyncio
import itertools
import threading
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import boto3
import pytest
from langgraph.store.base import BaseStore
from langgraph.store.memory import InMemoryStore

from langorch.adapters.dynamodb.memory import build_memory_store, create_memory_table
from langorch.adapters.sqlite import memory as sqlite_memory
from langorch.adapters.sqlite._db import Database
from langorch.app.memory import (
    MAX_VALUE_BYTES,
    MemoryManager,
    MemoryTooLargeError,
    history_namespace,
    preferences_namespace,
)
from tests.fakes.embeddings import TopicEmbeddings

TABLE = "memory"
T0 = datetime(2025, 3, 4, 12, 0, tzinfo=UTC)


def ticking_clock() -> Callable[[], datetime]:
    """A clock that moves one minute per call, so saves have a known order."""
    ticks = itertools.count()
    return lambda: T0 + timedelta(minutes=next(ticks))


@pytest.fixture(params=["dynamodb", "sqlite"])
def fresh_store(request: pytest.FixtureRequest) -> Callable[[], BaseStore]:
    """Each call is a new process's store: its own client (connections), the same table (file)."""
    factory: Callable[[], BaseStore] = request.getfixturevalue(f"{request.param}_stores")
    return factory


@pytest.fixture
def dynamodb_stores(aws: None) -> Callable[[], BaseStore]:
    create_memory_table(boto3.client("dynamodb", region_name="us-east-1"), TABLE)
    return lambda: build_memory_store(boto3.client("dynamodb", region_name="us-east-1"), TABLE)


@pytest.fixture
def sqlite_stores(sqlite_db: Database) -> Callable[[], BaseStore]:
    return lambda: sqlite_memory.build_memory_store(Database(sqlite_db.path))


@pytest.fixture(params=["dynamodb", "sqlite", "in_memory"])
def store(request: pytest.FixtureRequest) -> Iterator[BaseStore]:
    """MemoryManager must behave the same on any BaseStore."""
    if request.param == "in_memory":
        yield InMemoryStore()
        return
    factory = request.getfixturevalue(f"{request.param}_stores")
    yield factory()


# --- across instances (the point of long-term memory) --------------------------------------


def test_preferences_saved_by_one_run_are_read_by_the_next(
    fresh_store: Callable[[], BaseStore],
) -> None:
    # Given a run that learned the user's preferences
    MemoryManager(fresh_store()).update_preferences(
        "u1", {"restaurant": "Green Bowl", "budget": 12.5}
    )
    # When a later run, in another process, loads them
    prefs = MemoryManager(fresh_store()).get_preferences("u1")
    # Then it sees exactly what was saved, numbers as plain numbers
    assert prefs == {"restaurant": "Green Bowl", "budget": 12.5}
    assert isinstance(prefs["budget"], float)


def test_history_saved_by_earlier_runs_is_read_newest_first_by_the_next(
    fresh_store: Callable[[], BaseStore],
) -> None:
    # Given three runs, each in its own process, that remembered what they ordered
    clock = ticking_clock()
    for n in range(3):
        MemoryManager(fresh_store(), clock=clock).save_history(
            "u1", "lunch_order", f"run-{n}", {"order": f"bowl-{n}", "total": 10 + n}
        )
    # When the next run reads the last two
    history = MemoryManager(fresh_store()).get_history("u1", "lunch_order", limit=2)
    # Then it gets the newest first, with what each run saved
    assert [(h["run_id"], h["summary"]) for h in history] == [
        ("run-2", {"order": "bowl-2", "total": 12}),
        ("run-1", {"order": "bowl-1", "total": 11}),
    ]


def test_numbers_read_back_as_dynamodb_keeps_them(fresh_store: Callable[[], BaseStore]) -> None:
    # Given preferences with a fraction, an int and a whole float
    MemoryManager(fresh_store()).update_preferences("u1", {"budget": 12.5, "guests": 3, "tip": 2.0})
    # When another process reads them
    prefs = MemoryManager(fresh_store()).get_preferences("u1")
    # Then the fraction is a float, and whole numbers are ints (DynamoDB keeps no difference)
    assert prefs == {"budget": 12.5, "guests": 3, "tip": 2}
    assert [type(prefs[key]) for key in ("budget", "guests", "tip")] == [float, int, int]
    # And so for an item read by key
    tip = fresh_store().get(preferences_namespace("u1"), "tip")
    assert tip is not None and type(tip.value["value"]) is int


@pytest.mark.parametrize("number", [float("nan"), float("inf"), float("-inf")])
def test_a_number_that_is_not_finite_is_refused(
    fresh_store: Callable[[], BaseStore], number: float
) -> None:
    # Given a value with a number no JSON document or DynamoDB item can hold
    store = fresh_store()
    # When it is saved, then it is refused, naming where it is
    with pytest.raises(ValueError, match=r"value\.window\[1\]"):
        store.put(("users", "u1", "preferences"), "delivery", {"window": [12, number]})
    assert store.get(("users", "u1", "preferences"), "delivery") is None


def test_the_store_uses_the_client_it_is_given(aws: None) -> None:
    # Given a client that records the operations it sends
    client = boto3.client("dynamodb", region_name="us-east-1")
    create_memory_table(client, TABLE)
    sent: list[str] = []
    client.meta.events.register("before-call.dynamodb", lambda model, **_: sent.append(model.name))
    # When memory is read and written through a store built on it
    manager = MemoryManager(build_memory_store(client, TABLE))
    manager.update_preferences("u1", {"diet": "vegan"})
    manager.get_preferences("u1")
    # Then those calls went through that client
    assert {"UpdateItem", "Query"} <= set(sent)


def test_seed_namespaces_hold_the_memory(fresh_store: Callable[[], BaseStore]) -> None:
    # Given a user's preference and a run's history saved through the manager
    store = fresh_store()
    manager = MemoryManager(store, clock=ticking_clock())
    manager.update_preferences("u1", {"diet": "vegan"})
    manager.save_history("u1", "lunch_order", "run-1", {"order": "salad"})
    # Then they sit in seed 000's namespaces, readable by any code using the store directly
    diet = store.get(("users", "u1", "preferences"), "diet")
    run = store.get(("users", "u1", "agents", "lunch_order", "history"), "run-1")
    assert diet is not None
    assert diet.value == {"value": "vegan"}
    assert run is not None
    assert run.value["summary"] == {"order": "salad"}


# --- on any BaseStore ----------------------------------------------------------------------


def test_a_new_user_has_no_preferences_and_no_history(store: BaseStore) -> None:
    manager = MemoryManager(store)
    assert manager.get_preferences("nobody") == {}
    assert manager.get_history("nobody", "lunch_order") == []


def test_updating_some_preferences_keeps_the_others(store: BaseStore) -> None:
    manager = MemoryManager(store)
    manager.update_preferences("u1", {"restaurant": "Green Bowl", "diet": "vegan"})
    manager.update_preferences("u1", {"diet": "vegetarian"})
    assert manager.get_preferences("u1") == {"restaurant": "Green Bowl", "diet": "vegetarian"}


def test_a_none_value_forgets_a_preference(store: BaseStore) -> None:
    manager = MemoryManager(store)
    manager.update_preferences("u1", {"restaurant": "Green Bowl", "diet": "vegan"})
    manager.update_preferences("u1", {"diet": None})
    assert manager.get_preferences("u1") == {"restaurant": "Green Bowl"}


def test_preferences_keep_nested_json_values(store: BaseStore) -> None:
    manager = MemoryManager(store)
    value = {"days": ["tue", "thu"], "window": {"from": 12.5, "to": 13}, "ok": True, "n": None}
    manager.update_preferences("u1", {"delivery": value})
    assert manager.get_preferences("u1") == {"delivery": value}


def test_an_email_address_works_as_a_user_id(store: BaseStore) -> None:
    # Given a user id with the periods BaseStore refuses in namespace labels
    manager = MemoryManager(store, clock=ticking_clock())
    # When memory is saved and read for it
    manager.update_preferences("ana.lima@example.com", {"diet": "vegan"})
    manager.save_history("ana.lima@example.com", "lunch_order", "run-1", {"order": "salad"})
    # Then it round-trips, and stays apart from a look-alike id
    assert manager.get_preferences("ana.lima@example.com") == {"diet": "vegan"}
    assert manager.get_history("ana.lima@example.com", "lunch_order")[0]["run_id"] == "run-1"
    assert manager.get_preferences("ana%2Elima@example%2Ecom") == {}


def test_a_plain_id_is_its_own_namespace_label() -> None:
    assert preferences_namespace("u1") == ("users", "u1", "preferences")
    assert history_namespace("u1", "lunch_order") == (
        "users",
        "u1",
        "agents",
        "lunch_order",
        "history",
    )


def test_histories_of_different_workflows_stay_apart(store: BaseStore) -> None:
    manager = MemoryManager(store, clock=ticking_clock())
    manager.save_history("u1", "lunch_order", "run-1", {"order": "salad"})
    manager.save_history("u1", "invoice", "run-2", {"amount": 40})
    assert [h["run_id"] for h in manager.get_history("u1", "lunch_order")] == ["run-1"]


def test_saving_a_run_twice_keeps_one_entry(store: BaseStore) -> None:
    # Given a save_memory step that ran again after a crash
    manager = MemoryManager(store, clock=ticking_clock())
    manager.save_history("u1", "lunch_order", "run-1", {"order": "salad"})
    manager.save_history("u1", "lunch_order", "run-1", {"order": "salad"})
    # Then the run is remembered once
    assert len(manager.get_history("u1", "lunch_order")) == 1


def test_history_keeps_only_the_newest_runs(store: BaseStore) -> None:
    # Given a manager that keeps three runs per user and workflow
    manager = MemoryManager(store, clock=ticking_clock(), history_keep=3)
    # When five runs are saved
    for n in range(5):
        manager.save_history("u1", "lunch_order", f"run-{n}", {"n": n})
    # Then the two oldest were forgotten
    history = manager.get_history("u1", "lunch_order", limit=10)
    assert [h["run_id"] for h in history] == ["run-4", "run-3", "run-2"]


def test_history_is_newest_first_whatever_the_key_order(store: BaseStore) -> None:
    # Given runs whose ids sort opposite to when they ran
    manager = MemoryManager(store, clock=ticking_clock())
    for run_id in ["run-c", "run-b", "run-a"]:
        manager.save_history("u1", "lunch_order", run_id, {})
    # Then the newest run comes first
    history = manager.get_history("u1", "lunch_order", limit=1)
    assert [h["run_id"] for h in history] == ["run-a"]


def test_an_oversized_summary_is_refused(store: BaseStore) -> None:
    manager = MemoryManager(store)
    with pytest.raises(MemoryTooLargeError, match="remember a summary"):
        manager.save_history("u1", "lunch_order", "run-1", {"text": "x" * MAX_VALUE_BYTES})


def test_an_empty_user_id_is_refused(store: BaseStore) -> None:
    with pytest.raises(ValueError, match="user_id"):
        MemoryManager(store).get_preferences("")


def test_memory_saved_on_one_thread_is_read_on_another(store: BaseStore) -> None:
    # Given preferences saved by a step running on a worker thread (LangGraph's pool)
    worker = threading.Thread(
        target=lambda: MemoryManager(store).update_preferences("u1", {"diet": "vegan"})
    )
    worker.start()
    worker.join()
    # When the main thread reads them through the same store, then it sees them
    assert MemoryManager(store).get_preferences("u1") == {"diet": "vegan"}


def test_the_async_api_reads_what_the_sync_api_wrote(store: BaseStore) -> None:
    # Given a preference saved synchronously
    store.put(preferences_namespace("u1"), "diet", {"value": "vegan"})
    # When an async step reads it, then it gets it
    item = asyncio.run(store.aget(preferences_namespace("u1"), "diet"))
    assert item is not None and item.value == {"value": "vegan"}


def test_memory_tables_can_be_created_twice(aws: None) -> None:
    client: Any = boto3.client("dynamodb", region_name="us-east-1")
    create_memory_table(client, TABLE)
    create_memory_table(client, TABLE)
    assert TABLE in client.list_tables()["TableNames"]


# --- search: query_memory returns only what matches ----------------------------------------


def test_a_query_finds_the_preferences_whose_value_matches(store: BaseStore) -> None:
    # Given preferences about lunch and about travel
    manager = MemoryManager(store)
    manager.update_preferences("u1", {"restaurant": "Chipotle", "seat": "aisle", "budget": 15})
    # When memory is searched for a word of one value
    found = manager.search_preferences("u1", "lunch at Chipotle?")
    # Then only that preference comes back
    assert found == {"restaurant": "Chipotle"}


def test_a_query_finds_a_preference_by_the_words_of_its_name(store: BaseStore) -> None:
    # Given a preference whose name is several words
    manager = MemoryManager(store)
    manager.update_preferences("u1", {"items_to_order": ["Burrito Bowl"], "seat": "aisle"})
    # When the query asks, in a sentence, about one of those words
    found = manager.search_preferences("u1", "what did I order last time?")
    # Then the preference is found by its name
    assert found == {"items_to_order": ["Burrito Bowl"]}


def test_a_query_naming_the_namespace_finds_all_of_it(store: BaseStore) -> None:
    # Given two preferences
    manager = MemoryManager(store)
    manager.update_preferences("u1", {"restaurant": "Chipotle", "seat": "aisle"})
    # When the query asks for preferences (the namespace's label)
    found = manager.search_preferences("u1", "lunch preferences")
    # Then every preference matches
    assert found == {"restaurant": "Chipotle", "seat": "aisle"}


def test_a_query_with_no_match_finds_nothing(store: BaseStore) -> None:
    # Given stored preferences
    manager = MemoryManager(store)
    manager.update_preferences("u1", {"uber_eats_credentials": "alice:pw"})
    # When the query matches none of them
    found = manager.search_preferences("u1", "what did I order?")
    # Then nothing comes back (seed 000: memory_results={}), not everything
    assert found == {}


def test_a_query_searches_only_the_named_keys_when_given(store: BaseStore) -> None:
    # Given two preferences that both match the query
    manager = MemoryManager(store)
    manager.update_preferences("u1", {"restaurant": "Chipotle", "fallback": "Chipotle Express"})
    # When only one of them may be searched
    found = manager.search_preferences("u1", "chipotle", keys=["fallback"])
    # Then only it comes back
    assert found == {"fallback": "Chipotle Express"}


def test_a_query_finds_the_remembered_runs_that_match_newest_first(store: BaseStore) -> None:
    # Given three remembered runs, two of which ordered a burrito
    manager = MemoryManager(store, clock=ticking_clock())
    manager.save_history("u1", "lunch_order", "run-1", {"order": "Burrito Bowl"})
    manager.save_history("u1", "lunch_order", "run-2", {"order": "Salad"})
    manager.save_history("u1", "lunch_order", "run-3", {"order": "Burrito"})
    # When the history is searched for burritos
    found = manager.search_history("u1", "lunch_order", "burrito")
    # Then only those runs come back, the newest first
    assert [entry["run_id"] for entry in found] == ["run-3", "run-1"]
    assert manager.search_history("u1", "lunch_order", "pizza") == []


def test_with_an_embedding_model_a_query_matches_by_meaning(store: BaseStore) -> None:
    # Given an embedding model, and preferences that share no word with the query
    manager = MemoryManager(store, embeddings=TopicEmbeddings(), min_score=0.5)
    manager.update_preferences("u1", {"restaurant": "Chipotle", "seat": "aisle", "budget": 15})
    # When memory is searched for food
    found = manager.search_preferences("u1", "food")
    # Then the preference about food comes back, and only it
    assert found == {"restaurant": "Chipotle"}


def test_a_search_by_meaning_below_the_least_score_finds_nothing(store: BaseStore) -> None:
    # Given an embedding model and preferences on topics other than the query's
    manager = MemoryManager(store, embeddings=TopicEmbeddings(), min_score=0.5)
    manager.update_preferences("u1", {"seat": "aisle", "budget": 15})
    # When memory is searched for food, then nothing is close enough
    assert manager.search_preferences("u1", "food") == {}


def test_a_search_by_meaning_embeds_an_unchanged_item_once(store: BaseStore) -> None:
    # Given an embedding model and a preference
    embeddings = TopicEmbeddings()
    manager = MemoryManager(store, embeddings=embeddings)
    manager.update_preferences("u1", {"restaurant": "Chipotle"})
    # When memory is searched twice
    manager.search_preferences("u1", "food")
    manager.search_preferences("u1", "lunch")
    # Then the item was embedded once
    assert len(embeddings.embedded) == 1
