"""A local home the CLI finds as it finds ``langorch dev``'s (``<home>/stack.json``), without
starting a stack: for commands that only read and write the home's stores."""

from __future__ import annotations

import json
from pathlib import Path

from langorch.composition.embedded import EmbeddedContainer
from langorch.config import Settings


def local_home(home: Path) -> EmbeddedContainer:
    """Create the home's stores and its stack file; the container on them."""
    home.mkdir(parents=True, exist_ok=True)
    settings = Settings(local_home=str(home), endpoint_url="http://127.0.0.1:9")
    (home / "stack.json").write_text(
        json.dumps(
            {"endpoint_url": settings.endpoint_url, "settings": settings.model_dump(mode="json")}
        )
    )
    container = EmbeddedContainer(settings)
    container.ensure_resources()
    return container
