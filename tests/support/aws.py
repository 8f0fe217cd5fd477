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


def default_session_on_shared_loader() -> None:
    """Make boto3's default session one whose clients read botocore's service models through
    langorch's shared data loader (public APIs only: ``setup_default_session``'s
    ``botocore_session`` and the session's ``data_loader`` component).

    ``mock_aws`` resets the default session for every test, and a fresh session parses the
    models again: ~0.1 s of CPU per client, on most tests.
    """
    import boto3

    from langorch.adapters.aws import shared_botocore_session

    core = shared_botocore_session()
    boto3.setup_default_session(botocore_session=core)
    # boto3 appends its own data folder to the loader's search path per session: keep one.
    paths = core.get_component("data_loader").search_paths
    paths[:] = list(dict.fromkeys(paths))
