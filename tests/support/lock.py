"""``uv.lock`` as the tests read it: package name -> locked version."""

from __future__ import annotations

import tomllib
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]


def locked_versions(lock: Path = REPO_ROOT / "uv.lock") -> dict[str, str]:
    """Every package the lock names (normalised, lower case), at its one locked version."""
    document = tomllib.loads(lock.read_text(encoding="utf-8"))
    return {
        package["name"]: package["version"]
        for package in document["package"]
        if "version" in package and package.get("source", {}).get("editable") is None
    }
