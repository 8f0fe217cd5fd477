"""boto3 clients built from settings: the one place endpoints and regions are applied."""

from __future__ import annotations

import threading
from collections.abc import Iterable
from typing import Any
from urllib.parse import urlparse

import boto3
from botocore.config import Config

from langorch.config import Settings

_CONFIG = Config(
    retries={"mode": "standard", "max_attempts": 5}, connect_timeout=5, read_timeout=30
)
_S3_CONFIG = _CONFIG.merge(Config(signature_version="s3v4"))
"""S3 requests are SigV4 anyway; this makes presigned URLs (artifact links) SigV4 too, which
botocore would otherwise sign with SigV2 in us-east-1: deprecated, refused by newer buckets."""

# Building a client from a Session is not thread-safe (boto3's docs) and ``langorch dev`` builds
# clients from many threads, so it holds this lock; the clients themselves are thread-safe.
_LOCK = threading.Lock()


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


_loader: Any = None
_loader_lock = threading.Lock()  # not _LOCK: make_client holds that while it builds a session


def _data_loader() -> Any:
    """botocore's data loader, one per process for every session.

    A new session otherwise reads and parses each service's model files again (about 40 ms per
    client here); shared, they are parsed once per process, and a process forked after
    :func:`warm_clients` (a ``langorch dev`` sandbox) inherits them parsed.
    """
    global _loader
    with _loader_lock:
        if _loader is None:
            from botocore.loaders import create_loader

            _loader = create_loader()
        return _loader


def shared_botocore_session() -> Any:
    """A new botocore session reading service models through the process's one data loader
    (credentials, config and clients stay its own)."""
    from botocore.session import get_session

    core = get_session()
    core.register_component("data_loader", _data_loader())
    return core


def _shared_session(**kwargs: Any) -> boto3.Session:
    """A boto3 session on the shared data loader."""
    session = boto3.Session(botocore_session=shared_botocore_session(), **kwargs)
    # boto3 appends its own data folder to the loader's search path per session: keep one.
    paths = _data_loader().search_paths
    paths[:] = list(dict.fromkeys(paths))
    return session


def warm_clients(services: Iterable[str]) -> None:
    """Parse these services' models and endpoint rules now, into the shared data loader.

    For a process that forks workers (``langorch dev``'s fork server): each worker's first
    clients then cost a few milliseconds instead of ~40 ms each. No request is made.
    """
    session = _shared_session(
        aws_access_key_id="warm",
        aws_secret_access_key="warm",  # noqa: S106 - never sent anywhere
        region_name="us-east-1",
    )
    for service in services:
        session.client(service, endpoint_url="http://127.0.0.1:9")  # type: ignore[call-overload]


def new_session(settings: Settings) -> boto3.Session:
    """A boto3 session for these settings, to share between all the clients of one container.

    A session loads botocore's data files and credential chain (~55 ms on a cold start,
    PERFORMANCE P3), so a container builds one and every client reuses it.

    Args:
        settings: for a local endpoint, the session gets fixed credentials.
    """
    if is_local_endpoint(settings.endpoint_url):
        # The local emulator accepts any credentials; fixed ones mean a developer needs no AWS
        # account and a real profile is never sent to it.
        return _shared_session(
            aws_access_key_id="local",
            aws_secret_access_key="local",  # noqa: S106 - the emulator's, not a secret
            region_name=settings.region,
        )
    return _shared_session()


def assumed_role_session(
    settings: Settings, role_arn: str, *, session_name: str = "langorch-file-reader"
) -> boto3.Session:
    """A session holding ``role_arn``'s credentials: fetched on first use, refreshed before
    they expire (a Lambda sandbox outlives one set), never at import or SnapStart snapshot.

    Args:
        settings: region and endpoint of the STS call.
        role_arn: the role to assume.
        session_name: shown in CloudTrail for every call made with the role.
    """
    from botocore.credentials import CredentialProvider, DeferredRefreshableCredentials
    from botocore.session import get_session

    sts = make_client("sts", settings)

    def fetch() -> dict[str, str]:
        issued = sts.assume_role(RoleArn=role_arn, RoleSessionName=session_name)["Credentials"]
        return {
            "access_key": issued["AccessKeyId"],
            "secret_key": issued["SecretAccessKey"],
            "token": issued["SessionToken"],
            "expiry_time": issued["Expiration"].isoformat(),
        }

    class AssumedRole(CredentialProvider):  # type: ignore[misc]
        METHOD = "langorch-assume-role"

        def load(self) -> DeferredRefreshableCredentials:
            return DeferredRefreshableCredentials(refresh_using=fetch, method=self.METHOD)

    core = get_session()
    # First in botocore's own resolver chain (a public hook): the session's clients sign with
    # the role's refreshable credentials, as an assume-role profile would.
    core.get_component("credential_provider").insert_before("env", AssumedRole())
    return boto3.Session(botocore_session=core, region_name=settings.region)


def make_client(service: str, settings: Settings, *, session: boto3.Session | None = None) -> Any:
    """A boto3 client for ``service`` at the configured region and endpoint.

    Args:
        service: boto3 service name (``"dynamodb"``, ``"s3"``, …).
        settings: where the resources are; ``endpoint_url`` points at the local emulator.
        session: the session to build it from (a container's, see :func:`new_session`);
            default: a new one.
    """
    with _LOCK:
        return (session or new_session(settings)).client(
            service,  # type: ignore[call-overload]
            region_name=settings.region,
            endpoint_url=settings.endpoint_url,
            config=_S3_CONFIG if service == "s3" else _CONFIG,
        )


BEDROCK_CONNECT_TIMEOUT = 5.0


def bedrock_runtime_client(
    *,
    region: str,
    read_timeout: float,
    endpoint_url: str | None = None,
    session: boto3.Session | None = None,
) -> Any:
    """A bedrock-runtime client that makes exactly one attempt per call.

    Never built from :class:`Settings`' ``endpoint_url``: the local emulator has no Converse,
    and its fake credentials would replace the user's. Credentials come from ``session``, else
    the standard chain (environment, profile, SSO, the function's role).

    Args:
        region: Bedrock's region.
        read_timeout: Seconds to wait for the answer (the step's remaining time).
        endpoint_url: A VPC endpoint or a test server; ``None``: Bedrock's public endpoint.
        session: Explicit credentials; default: a new session (never a container's, which is
            the emulator's under ``make dev`` and ``runs start --local``).
    """
    config = Config(
        # The step owns retries (max_retries, backoff, Retry-After): one HTTP attempt here.
        retries={"total_max_attempts": 1, "mode": "standard"},
        connect_timeout=min(BEDROCK_CONNECT_TIMEOUT, read_timeout),
        read_timeout=read_timeout,
    )
    with _LOCK:
        return (session or boto3.Session()).client(
            "bedrock-runtime", region_name=region, endpoint_url=endpoint_url, config=config
        )
