"""The dependency set is reproducible: ranges admit only what the suite runs on (the lock), the
emulator is pinned exactly, and the uv that installs matches the uv that builds the layer."""

from __future__ import annotations

import importlib.metadata
import re
import tomllib

from packaging.requirements import Requirement

from tests.support.lock import REPO_ROOT, locked_versions

PYPROJECT = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text(encoding="utf-8"))


def _declared() -> list[Requirement]:
    project = PYPROJECT["project"]
    requirements = [*project["dependencies"]]
    for extra in project["optional-dependencies"].values():
        requirements += extra
    requirements += PYPROJECT["dependency-groups"]["dev"]
    return [Requirement(r) for r in requirements]


def _lower_bound(requirement: Requirement) -> str | None:
    for spec in requirement.specifier:
        if spec.operator in (">=", "=="):
            return spec.version
    return None


def test_every_declared_dependency_admits_its_locked_version_as_its_lowest() -> None:
    # Given the versions the suite is installed with
    locked = locked_versions()
    # Then each direct dependency's range starts at the locked version: the lowest version
    # pyproject.toml allows is the one that was tested (raise the bound with the lock)
    lagging = {
        str(r): locked[r.name.lower()]
        for r in _declared()
        if _lower_bound(r) != locked[r.name.lower()]
    }
    assert not lagging, f"lower bound is not the locked version: {lagging}"


def test_the_emulator_is_pinned_exactly() -> None:
    moto = next(r for r in _declared() if r.name == "moto")
    assert [s.operator for s in moto.specifier] == ["=="]


def test_the_environment_is_the_lock() -> None:
    # What `make install` put in this virtualenv is what the lock says
    locked = locked_versions()
    for name in ("langgraph", "moto", "boto3", "botocore", "pydantic", "mcp"):
        assert importlib.metadata.version(name) == locked[name], name


def test_the_makefiles_uv_is_the_one_that_builds_the_layer() -> None:
    makefile = (REPO_ROOT / "Makefile").read_text(encoding="utf-8")
    pinned = re.search(r"^UV_VERSION := (\S+)$", makefile, re.MULTILINE)
    assert pinned is not None
    assert pinned.group(1) == locked_versions()["uv"]
