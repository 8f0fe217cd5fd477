"""The Lambda handlers' container: built once per sandbox from the environment's settings.

Each handler in ``functions/`` holds one :class:`SandboxContainer` (``container =
SandboxContainer()`` at module level) and calls it, instead of keeping its own copy of a lazy
singleton. The container is built on the first invocation (an import never reads the
environment or builds a client) and reused by every later one: clients, the boto3 session and
the compiled-graph cache survive across warm invocations.

The holder lives in the handler's module, not here, because a module is a sandbox: locally
(``langorch dev``, the tests' stacks) the four functions share one process, get their settings
as environment variables around each invocation, and a new stack re-imports each handler (a
cold start), which must not find the previous stack's container. Invocations run in threads
there, so the first build is guarded by a lock.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from langorch.composition.container import Container
    from langorch.config import Settings


class SandboxContainer:
    """The container of one function's sandbox, built on first call from ``Settings()``.

    Args:
        container: a ready container to use instead (tests).
    """

    def __init__(self, container: Container | None = None) -> None:
        self._lock = threading.Lock()
        self._container = container

    def __call__(self) -> Container:
        """The sandbox's container, built on first use from :class:`~langorch.config.Settings`."""
        built = self._container
        if built is not None:
            return built
        with self._lock:
            if self._container is None:
                # Imported here: Settings reads the environment, which belongs to the first
                # invocation, not to the import.
                from langorch.config import Settings

                self._container = build_container(Settings())
            return self._container

    def use(self, replacement: Container | None) -> Container | None:
        """Install ``replacement`` as the sandbox's container (``None``: build on next use).

        Args:
            replacement: the container the handler uses from now on.

        Returns:
            The container it replaces, so a test can put it back.
        """
        with self._lock:
            previous, self._container = self._container, replacement
        return previous


def build_container(settings: Settings, **options: Any) -> Container:
    """The container for ``settings``: the embedded default's when ``local_home`` is set
    (:class:`~langorch.composition.embedded.EmbeddedContainer`), the cloud's otherwise.

    Args:
        settings: where the resources are.
        options: :class:`Container`'s keyword arguments (clock, ids, llm, http, email, session).
    """
    from langorch.composition.container import Container

    if settings.local_home:
        from langorch.composition.embedded import EmbeddedContainer

        return EmbeddedContainer(settings, **options)
    return Container(settings, **options)
