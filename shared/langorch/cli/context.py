"""What every command handler gets: the parsed options, the output, and lazily built clients."""

from __future__ import annotations

import argparse
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from langorch.cli.output import Output
from langorch.cli.target import (
    Target,
    TargetError,
    endpoint_reachable,
    local_home,
    resolve_target,
)

if TYPE_CHECKING:
    from langorch.adapters.dynamodb.definitions import DefinitionsRepository
    from langorch.composition.container import Container
    from langorch.config import Settings

ClientFactory = Callable[[str, "Settings"], Any]


class Context:
    """Shared state of one CLI invocation.

    Nothing talks to AWS until a handler asks for a client, so offline commands
    (``workflows validate``) work with no stack at all.

    Args:
        args: the parsed command line (``endpoint_url``, ``stack``, ``region``, ``json``, …).
        out: where results and messages go.
        env: the environment for target resolution (default: ``os.environ``).
        cwd: where ``.langorch/`` is looked for (default: the current directory).
        client_factory: builds a boto3 client for a service and settings (default:
            :func:`langorch.adapters.aws.make_client`).
    """

    def __init__(
        self,
        args: argparse.Namespace,
        out: Output,
        *,
        env: Mapping[str, str] | None = None,
        cwd: Path | None = None,
        client_factory: ClientFactory | None = None,
    ) -> None:
        self.args = args
        self.out = out
        self._env = env
        self._cwd = cwd
        self._client_factory = client_factory
        self._target: Target | None = None
        self._clients: dict[str, Any] = {}
        self._container: Container | None = None

    def target(self) -> Target:
        """The deployment to talk to (resolved once).

        Raises:
            TargetError: no stack to talk to.
        """
        if self._target is None:
            self._target = resolve_target(
                endpoint_url=getattr(self.args, "endpoint_url", None),
                stack=getattr(self.args, "stack", None),
                region=getattr(self.args, "region", None),
                home=getattr(self.args, "home", None),
                env=self._env,
                cwd=self._cwd,
            )
        return self._target

    def home(self) -> Path:
        """The local stack's folder (``--home``, ``LANGORCH_HOME``, ``./.langorch``)."""
        return local_home(getattr(self.args, "home", None), env=self._env, cwd=self._cwd)

    def reachable_target(self) -> Target | None:
        """The deployment when one is available, else ``None`` (for offline-capable commands).

        A target named on the command line or in the environment is always used (its
        failures are reported); the local stack file found by default is used only while
        its endpoint answers.
        """
        try:
            target = self.target()
        except TargetError:
            return None
        if target.explicit or target.settings.endpoint_url is None:
            return target
        return target if endpoint_reachable(target.settings.endpoint_url) else None

    @property
    def settings(self) -> Settings:
        """The target's settings."""
        return self.target().settings

    def client(self, service: str) -> Any:
        """A boto3 client for ``service`` at the target (built once)."""
        if service not in self._clients:
            factory = self._client_factory
            if factory is None:
                # boto3 is imported on first use so that --help and offline commands start fast.
                from langorch.adapters.aws import make_client

                factory = make_client
            self._clients[service] = factory(service, self.settings)
        return self._clients[service]

    @property
    def container(self) -> Container:
        """The target's adapters, wired as its functions wire them (built once): the local
        home's SQLite stores for a local stack, DynamoDB and the other AWS services otherwise."""
        if self._container is None:
            from langorch.composition.bootstrap import build_container

            self._container = build_container(self.settings)
        return self._container

    def definitions(self) -> DefinitionsRepository:
        """The definitions store of the target (the local stack's mirrors this API)."""
        return self.container.definitions
