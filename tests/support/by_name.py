"""An in-memory store of registrations kept by their ``name``: what the agent and tool-server
fakes share."""

from __future__ import annotations

from typing import Generic, Protocol, TypeVar


class Named(Protocol):
    """Anything registered under a name."""

    @property
    def name(self) -> str: ...


T = TypeVar("T", bound=Named)


class InMemoryByName(Generic[T]):
    """Registrations by name: put (store or replace), get, list, delete."""

    def __init__(self) -> None:
        self._by_name: dict[str, T] = {}

    def put(self, registration: T) -> bool:
        """Store or replace; returns whether it is new."""
        new = registration.name not in self._by_name
        self._by_name[registration.name] = registration
        return new

    def get(self, name: str) -> T | None:
        """The registration, or ``None``."""
        return self._by_name.get(name)

    def list(self) -> list[T]:
        """Every registration, by name."""
        return [self._by_name[name] for name in sorted(self._by_name)]

    def delete(self, name: str) -> bool:
        """Remove; returns whether there was one."""
        return self._by_name.pop(name, None) is not None
