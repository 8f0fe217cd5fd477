"""DynamoDB's per-request atomicity for clients of moto, through botocore's public events.

DynamoDB applies each request atomically: of two conditional writes racing for one item, one
wins. moto checks a condition and applies the write as separate steps, so threads racing through
it can both win — a behaviour of the emulator, not of DynamoDB. Tests that race threads against
moto's DynamoDB make each request one critical section instead: a client registered here takes
one lock, shared by every registered client, from ``before-call`` to ``after-call`` (or
``after-call-error``). Nothing of moto or botocore is replaced; our code is untouched, so code
that read-then-wrote without a condition would still let both threads win.
"""

from __future__ import annotations

import threading
from typing import Any

_ONE_AT_A_TIME = threading.RLock()


def _enter(**_: Any) -> None:
    _ONE_AT_A_TIME.acquire()


def _leave(**_: Any) -> None:
    _ONE_AT_A_TIME.release()


def one_request_at_a_time(client: Any) -> Any:
    """Make every request of ``client`` atomic with those of every other client registered here.

    Returns:
        The same client.
    """
    events = client.meta.events
    service = client.meta.service_model.service_id.hyphenize()
    events.register(f"before-call.{service}", _enter, unique_id="tests-atomic-enter")
    events.register(f"after-call.{service}", _leave, unique_id="tests-atomic-leave")
    events.register(f"after-call-error.{service}", _leave, unique_id="tests-atomic-error")
    return client


_LOADERS: dict[str | None, Any] = {}


def share_service_models() -> None:
    """Let every botocore session of this process read AWS's service models once.

    Each new botocore session (moto's ``mock_aws`` resets boto3's default one for every test;
    every container builds its own) reads and parses the service models, endpoints and
    partitions again: ~0.1 s of CPU per client, on every test that makes one. The models are
    data shipped with botocore, the same for every session, so one loader per data path serves
    them all from its cache. Sessions stay separate: credentials, config and clients are not
    shared, only the parsed files.
    """
    from botocore import loaders, session

    def register_shared_loader(self: Any) -> None:
        def loader() -> Any:
            path = self.get_config_variable("data_path")
            if path not in _LOADERS:
                _LOADERS[path] = loaders.create_loader(path)
            return _LOADERS[path]

        self._components.lazy_register_component("data_loader", loader)

    session.Session._register_data_loader = register_shared_loader
