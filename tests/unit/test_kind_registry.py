"""The kind registry's tables say what the built-in kinds say, and a kind loads alone.

``registry.BUILTIN_KINDS`` (name -> module) and ``registry.BUILTIN_FIELDS`` (the fields each
built-in kind owns) let validation load only the kinds a definition uses (issue 26); they must
agree with the kinds' own classes, or a kind would be looked up in the wrong module and a field
set on a step of another kind would go unreported.
"""

from __future__ import annotations

import importlib
import json
import subprocess
import sys
from pathlib import Path

import pytest

from langorch.domain.kinds import registry

REPO = Path(__file__).resolve().parents[2]


def test_each_builtin_kind_is_in_the_module_its_name_maps_to() -> None:
    # Given every built-in kind module's KINDS
    declared = {
        kind.name: module
        for module in registry.BUILTIN_MODULES
        for kind in importlib.import_module(f"langorch.domain.kinds.{module}").KINDS
    }

    # Then the name -> module table lists exactly them, in the order names() gives
    assert dict(registry.BUILTIN_KINDS) == declared
    assert list(registry.BUILTIN_KINDS) == list(declared)


@pytest.mark.parametrize("fields_of", ["step_fields", "block_fields"])
def test_the_fields_table_is_what_each_builtin_kind_owns(fields_of: registry.FieldsOf) -> None:
    # Given the built-in kinds, loaded
    kinds = {name: registry.get(name) for name in registry.BUILTIN_KINDS}

    # Then the table gives each the fields its class declares (none when it is not listed)
    for name, kind in kinds.items():
        assert kind is not None
        listed = registry.BUILTIN_FIELDS.get(name, {}).get(fields_of, frozenset())
        assert listed == getattr(kind, fields_of), name


_PROBE = """
import json, sys
sys.path.insert(0, {shared!r})
from langorch.domain.kinds import registry
before = registry.owned_fields("step_fields")
approval = registry.get("approval").name
loaded = sorted(m for m in sys.modules if m.startswith("langorch.domain.kinds."))
everything = {{k.name: sorted(k.step_fields) for k in registry.all_kinds()}}
after = registry.owned_fields("step_fields")
print(json.dumps({{"approval": approval, "loaded": loaded, "same": before == after,
                  "names": registry.names()}}))
"""


@pytest.mark.subprocess
def test_looking_up_a_kind_loads_its_module_alone() -> None:
    # Given a fresh interpreter
    probe = _PROBE.format(shared=str(REPO / "shared"))

    # When it asks which fields the kinds own, then looks up the approval kind
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=120
    )
    found = json.loads(done.stdout.strip().splitlines()[-1])

    # Then only the approval kind's module was imported (with the registry and the kinds' base),
    # the owned fields read before any kind loaded are those of every kind loaded, and the
    # names come in the built-in order however the kinds were loaded
    assert found["approval"] == "approval"
    assert found["loaded"] == [
        "langorch.domain.kinds.approval",
        "langorch.domain.kinds.base",
        "langorch.domain.kinds.registry",
    ]
    assert found["same"] is True
    assert found["names"] == list(registry.BUILTIN_KINDS)
