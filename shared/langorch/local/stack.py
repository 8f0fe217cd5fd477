"""The local stack: an AWS emulator (moto in server mode) with langorch's resources in it.

``langorch dev`` starts one and writes ``.langorch/stack.json``; every other command finds the
stack through that file and talks to it exactly as it talks to AWS.
"""

from __future__ import annotations

import json
import logging
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from langorch.config import Settings

STACK_FILE = "stack.json"


@dataclass
class LocalStack:
    """A running emulator and what was provisioned in it."""

    settings: Settings
    home: Path
    examples: list[str] = field(default_factory=list)
    _stop: Callable[[], None] | None = None

    @property
    def stack_file(self) -> Path:
        return self.home / STACK_FILE

    def stop(self) -> None:
        """Stop the emulator and forget the stack file."""
        self.stack_file.unlink(missing_ok=True)
        if self._stop is not None:
            self._stop()
            self._stop = None


def free_port() -> int:
    """A TCP port nothing listens on right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _wait_for(host: str, port: int, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with socket.create_connection((host, port), timeout=0.2):
                return
        except OSError:
            time.sleep(0.05)
    raise TimeoutError(f"the emulator did not answer on {host}:{port} within {timeout:.0f} s")


def start_emulator(port: int) -> Callable[[], None]:
    """Start moto's server on 127.0.0.1:``port`` in this process; returns its stop function."""
    from moto.server import ThreadedMotoServer

    from langorch.local.emulator import serialise_dynamodb_writes

    undo_atomic = serialise_dynamodb_writes()
    # One access-log line per AWS call drowns what the developer wants to see.
    logging.getLogger("werkzeug").setLevel(logging.WARNING)
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    _wait_for("127.0.0.1", port)

    def stop() -> None:
        server.stop()
        undo_atomic()

    return stop


def merged_offline_script(example_dirs: list[Path], target: Path) -> Path | None:
    """Merge the examples' scripted LLM answers (``offline.yaml``) into one file."""
    merged: dict[str, Any] = {}
    for directory in example_dirs:
        script = directory / "offline.yaml"
        if script.exists():
            merged.update(yaml.safe_load(script.read_text()) or {})
    if not merged:
        return None
    target.write_text(yaml.safe_dump(merged, sort_keys=True))
    return target


def start_local_stack(
    *,
    home: Path,
    port: int | None = None,
    examples: Path | None = None,
    region: str = "us-east-1",
) -> LocalStack:
    """Start the emulator, create every resource, seed built-ins and register the examples.

    Args:
        home: where the stack file, the merged offline script and the outbox live.
        port: the emulator's port (default: a free one).
        examples: a folder of ``<name>/definitions.yaml`` to register (``None``: none).
        region: the emulated region.
    """
    from langorch.app.container import Container
    from langorch.app.definitions import register_files, seed_builtins

    home.mkdir(parents=True, exist_ok=True)
    port = port or free_port()
    stop = start_emulator(port)
    try:
        example_dirs = (
            sorted(p.parent for p in examples.glob("*/definitions.yaml"))
            if (examples is not None and examples.is_dir())
            else []
        )
        script = merged_offline_script(example_dirs, home / "offline.yaml")
        settings = Settings(
            region=region,
            endpoint_url=f"http://127.0.0.1:{port}",
            offline_script=str(script) if script else None,
        )
        container = Container(settings)
        container.ensure_resources()
        seed_builtins(container.definitions)
        registered: list[str] = []
        if example_dirs:
            results = register_files(
                container.definitions, [str(d / "definitions.yaml") for d in example_dirs]
            )
            registered = [r.id for r in results if r.kind == "workflow"]
        stack = LocalStack(settings=settings, home=home, examples=registered, _stop=stop)
        stack.stack_file.write_text(
            json.dumps(
                {
                    "endpoint_url": settings.endpoint_url,
                    "settings": settings.model_dump(mode="json"),
                },
                indent=2,
            )
        )
        return stack
    except BaseException:
        stop()
        raise
