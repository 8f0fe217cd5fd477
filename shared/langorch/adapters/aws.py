"""boto3 clients built from settings: the one place endpoints and regions are applied."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlparse

import boto3
from botocore.config import Config

from langorch.config import Settings

_CONFIG = Config(
    retries={"mode": "standard", "max_attempts": 5}, connect_timeout=5, read_timeout=30
)


def is_local_endpoint(endpoint_url: str | None) -> bool:
    """Whether the endpoint is an emulator on this machine."""
    if not endpoint_url:
        return False
    host = urlparse(endpoint_url).hostname or ""
    return host in ("localhost", "::1") or host.startswith("127.")


def profile_region(profile: str | None = None) -> str | None:
    """The region boto3 resolves for ``profile`` (its ``region`` in ``~/.aws/config``, or
    ``AWS_DEFAULT_REGION``), ``None`` when none is configured."""
    try:
        return boto3.Session(profile_name=profile).region_name
    except Exception:
        return None


def make_client(service: str, settings: Settings, *, session: boto3.Session | None = None) -> Any:
    """A boto3 client for ``service`` at the configured region and endpoint.

    Args:
        service: boto3 service name (``"dynamodb"``, ``"s3"``, …).
        settings: where the resources are; ``endpoint_url`` points at the local emulator.
        session: an explicit session (tests); default: a new session from the environment.
    """
    if session is None and is_local_endpoint(settings.endpoint_url):
        # The local emulator accepts any credentials; fixed ones mean a developer needs no AWS
        # account and a real profile is never sent to it.
        session = boto3.Session(
            aws_access_key_id="local",
            aws_secret_access_key="local",  # noqa: S106 - the emulator's, not a secret
            region_name=settings.region,
        )
    session = session or boto3.Session()
    return session.client(
        service,  # type: ignore[call-overload]
        region_name=settings.region,
        endpoint_url=settings.endpoint_url,
        config=_CONFIG,
    )
