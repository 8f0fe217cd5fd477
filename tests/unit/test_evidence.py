"""Approval evidence (issue 29, item 5): a run's approvals exported as a hash-chained ledger that
``langorch audit verify`` checks; altering one byte names the first bad entry."""

from __future__ import annotations

import itertools
import json
from pathlib import Path
from typing import Any

from langorch.app.evidence import export_ledger
from langorch.domain.evidence import GENESIS, digest, verify
from tests.unit.approvals_support import ALICE, FakeStack, open_and_decide


def _ledger(stack: FakeStack, callback: Any) -> list[dict[str, Any]]:
    """A run whose approval alice viewed and approved, exported."""
    parked = stack.park()
    open_and_decide(callback, parked.links[ALICE], "approved", comment="fine")
    return export_ledger(stack.container, run_id=parked.run_id)  # type: ignore[arg-type]


def _lines(entries: list[dict[str, Any]]) -> list[str]:
    return [json.dumps(e, sort_keys=True, ensure_ascii=False) for e in entries]


def test_an_exported_ledger_chains_the_run_its_question_every_event_and_the_decision(
    stack: FakeStack, callback: Any
) -> None:
    # Given a run whose approval alice viewed and approved
    entries = _ledger(stack, callback)

    # Then the ledger opens with the run's workflow version, then the question, then the events,
    # and ends with the decision and the digest of what it let through
    kinds = [e["kind"] for e in entries]
    assert kinds[0] == "run" and entries[0]["workflow_version"] is not None
    assert kinds[1] == "asked" and kinds[-1] == "decided"
    assert {e["action"] for e in entries if e["kind"] == "event"} >= {"requested", "view", "decide"}
    decided = entries[-1]
    assert decided["actor"] == ALICE and decided["payload"]["comment"] == "fine"
    assert decided["authorised"] == digest(decided["payload"])
    # And each entry links to the one before
    assert entries[0]["prev"] == GENESIS
    assert all(b["prev"] == a["digest"] for a, b in itertools.pairwise(entries))
    assert verify(_lines(entries)).ok


def test_altering_one_byte_names_the_first_bad_entry(stack: FakeStack, callback: Any) -> None:
    # Given an exported ledger whose third entry has one byte changed
    lines = _lines(_ledger(stack, callback))
    third = lines[2]
    at = third.index('"kind":') + len('"kind":') + 2  # inside the value
    lines[2] = third[:at] + ("X" if third[at] != "X" else "Y") + third[at + 1 :]

    # When it is verified, then line 3 is named as altered
    found = verify(lines)
    assert (found.ok, found.first_bad) == (False, 3)
    assert "altered" in found.reason


def test_a_dropped_entry_breaks_the_chain_where_it_was(stack: FakeStack, callback: Any) -> None:
    lines = _lines(_ledger(stack, callback))
    del lines[1]
    found = verify(lines)
    assert found.first_bad == 2 and "does not follow" in found.reason


def test_the_cli_exports_and_verifies_a_file(
    stack: FakeStack, callback: Any, tmp_path: Path
) -> None:
    # Given the ledger written as `audit export --output` writes it
    from langorch.cli.commands.audit import _verify

    path = tmp_path / "ledger.jsonl"
    path.write_text("\n".join(_lines(_ledger(stack, callback))) + "\n", encoding="utf-8")

    # When `audit verify` reads it, then it exits 0; after an edit, 1
    class Out:
        json_mode = True

        def result(self, data: Any, text: Any) -> None:
            self.data = data

    class Ctx:
        out = Out()

    class Args:
        file = str(path)

    assert _verify(Ctx(), Args()) == 0  # type: ignore[arg-type]
    path.write_text(path.read_text().replace('"approved"', '"rejected"', 1), encoding="utf-8")
    assert _verify(Ctx(), Args()) == 1  # type: ignore[arg-type]
    assert Ctx.out.data["first_bad"] is not None


def test_each_audit_line_carries_the_link_its_store_wrote_and_the_export_keeps_it(
    stack: FakeStack, callback: Any
) -> None:
    # Given a run whose approval alice viewed and approved
    events = [e for e in _ledger(stack, callback) if e["kind"] == "event"]

    # Then its audit lines were chained as they were written: one chain, from GENESIS
    assert events[0]["stored_prev"] == GENESIS
    assert all(b["stored_prev"] == a["stored_digest"] for a, b in itertools.pairwise(events))


def test_a_line_altered_in_the_store_is_found_by_verify(stack: FakeStack, callback: Any) -> None:
    # Given a run's approval decided, then one of its audit lines rewritten in the store
    parked = stack.park()
    open_and_decide(callback, parked.links[ALICE], "approved")
    store = stack.container.approvals
    (approval,) = store.list(run_id=parked.run_id)
    trail = store._audit[approval.approval_id]
    trail[1] = trail[1].model_copy(update={"source_ip": "198.51.100.9"})

    # When it is exported (its export chain is whole) and verified
    lines = _lines(export_ledger(stack.container, run_id=parked.run_id))  # type: ignore[arg-type]
    found = verify(lines)

    # Then the rewritten line is named: the store's digest no longer holds
    assert found.first_bad == 4  # the run, the question, the first line, then this one
    assert "altered in the store" in found.reason
