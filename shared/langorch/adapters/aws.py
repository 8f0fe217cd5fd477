"""boto3 clients built from settings: the one place endpoints and regions are applied."""

from __future__ import annotations

from typing import Any

import boto3
from botocore.config import Config

from langorch.config import Settings

_CONFIG = Config(
    retries={"mode": "standard", "max_attempts": 5}, connect_timeout=5, read_timeout=30
)


def make_client(service: str, settings: Settings, *, session: boto3.Session | None = None) -> Any:
    """A boto3 client for ``service`` at the configured region and endpoint.

    Args:
        service: boto3 service name (``"dynamodb"``, ``"s3"``, …).
        settings: where the resources are; ``endpoint_url`` points at the local emulator.
        session: an explicit session (tests); default: a new session from the environment.
    """
    session = session or boto3.Session()
    return session.client(
        service,  # type: ignore[call-overload]
        region_name=settings.region,
        endpoint_url=settings.endpoint_url,
        config=_CONFIG,
    )
