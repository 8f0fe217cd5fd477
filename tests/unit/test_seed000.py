"""Seed 000 as written: its blocks and plan (``examples/seed000``) run unchanged, and an input
that neither the inputs schema nor an earlier step provides resolves as the seed says —
``shared_context``, else the user's stored preference, else empty.

The resolution is tested on the executor's scope (plain state, no graph), then end to end on
the in-memory fakes with the seed's own files. The CLI path (``runs start --local``) is
``tests/e2e/test_seed000.py``.
"""

from __future__ import annotations

from pathlib import Path

from langorch.app.definitions import register_files
from langorch.domain.definitions import BlockDefinition, BlockType, PlanStep
from langorch.engine.kinds.base import StepSpec, input_scope, scope_of
from langorch.engine.state import OrchestrationState
from tests.integration.conftest import run_to_end
from tests.support.recording import RecordingLLM
from tests.unit.conftest import MakeFakes

SEED000 = Path(__file__).resolve().parents[2] / "examples" / "seed000"
FILES = [
    SEED000 / name
    for name in (
        "query_memory.json",
        "open_uber_eats.json",
        "add_to_cart_generic.json",
        "lunch_plan.json",
    )
]


def _login_step(**step: object) -> StepSpec:
    """Seed 000's open_uber_eats block as a plan step."""
    block = BlockDefinition(
        block_id="open_uber_eats",
        input_keys=["uber_eats_credentials"],
        output_keys=["session_active", "logged_in"],
        prompt_template="Log in using credentials: {uber_eats_credentials}.",
    )
    plan_step = PlanStep.model_validate({"step_id": "login", "block_id": "open_uber_eats", **step})
    return StepSpec(step=plan_step, block=block, kind=BlockType.action, successors=())


def _state(shared: dict[str, object], preferences: dict[str, object]) -> OrchestrationState:
    return {"run_id": "run-1", "shared_context": shared, "user_preferences": preferences}


# --- the resolution order ------------------------------------------------------------------


def test_an_input_in_shared_context_wins_over_the_preference_of_that_name():
    # Given the input both in shared_context and among the user's preferences
    state = _state({"uber_eats_credentials": "from-the-run"}, {"uber_eats_credentials": "saved"})
    # When the step's inputs are resolved
    scope = input_scope(_login_step(), state)
    # Then shared_context's value is used
    assert scope["uber_eats_credentials"] == "from-the-run"


def test_an_input_not_in_shared_context_is_the_users_stored_preference():
    # Given the input only among the user's preferences
    state = _state({}, {"uber_eats_credentials": "alice:pw"})
    # When the step's inputs are resolved
    scope = input_scope(_login_step(), state)
    # Then the preference is used
    assert scope["uber_eats_credentials"] == "alice:pw"


def test_an_input_neither_holds_is_empty():
    # Given the input in neither shared_context nor the preferences
    state = _state({"other": 1}, {"restaurant": "Chipotle"})
    # When the step's inputs are resolved
    scope = input_scope(_login_step(), state)
    # Then it is the empty string (seed 000's `state.get(key, "")`)
    assert scope["uber_eats_credentials"] == ""


def test_a_mapped_input_resolves_its_source_the_same_way():
    # Given an input mapped from `login`, which only a preference holds, and one mapped from
    # a key nothing holds
    spec = _login_step(input_mappings={"uber_eats_credentials": "login"})
    unheld = _login_step(input_mappings={"uber_eats_credentials": "nowhere"})
    state = _state({}, {"login": "bob:pw", "uber_eats_credentials": "unused"})
    # When resolved, Then the source's preference is used, else empty
    assert input_scope(spec, state)["uber_eats_credentials"] == "bob:pw"
    assert input_scope(unheld, state)["uber_eats_credentials"] == ""


def test_a_preference_never_shadows_the_runs_own_names():
    # Given preferences named like the run's own names
    state = _state({}, {"run_id": "forged", "user_preferences": "forged"})
    # When templates' names are resolved
    scope = scope_of(None, state)
    # Then the run's own values are kept
    assert scope["run_id"] == "run-1"
    assert scope["user_preferences"] == {"run_id": "forged", "user_preferences": "forged"}


# --- the seed's own files, end to end on the fakes -----------------------------------------


def test_seed_000_files_register_and_run_resolving_inputs_from_preferences(
    make_container: MakeFakes,
):
    # Given seed 000's blocks and plan, registered as they are (the warnings do not stop them),
    # and a user whose preferences hold the credentials
    container = make_container()
    llm = RecordingLLM({"open_uber_eats": {"session_active": "true", "logged_in": "true"}})
    container.__dict__["llm"] = llm
    results = register_files(container.definitions, [str(f) for f in FILES])
    assert [(r.kind, r.id) for r in results][-1] == ("workflow", "seed000_lunch")
    container.memory.update_preferences("u1", {"uber_eats_credentials": "alice:pw"})

    # When it runs with the memory query as an (undeclared) run input
    result = run_to_end(container, "seed000_lunch", {"memory_query": "what did I order?"})

    # Then every step ran; the credentials came from the preference, the cart's inputs that
    # nothing holds rendered empty, and the query, which no preference matches, found nothing
    assert result.status == "succeeded"
    prompts = {r.step_id: r.prompt for r in llm.requests}
    assert prompts["step_2"] == (
        "Navigate to ubereats.com. Log in using credentials: alice:pw. Confirm you are logged in."
    )
    assert prompts["step_3"] == (
        "Add these items to the cart: . Current platform state: . Confirm each item was added."
    )
    assert result.outputs["memory_results"] == {}
    assert result.outputs["session_active"] == "true"
    assert set(result.outputs) >= {"cart_contents", "cart_total"}
