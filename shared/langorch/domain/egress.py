"""Which hosts ``http`` steps and the ``http_get`` tool may reach: the deployment's domain
allow-list (``http_allowed_domains``), checked in the runner in every mode.

A model that reads prompt-injected content can be told to fetch a URL carrying the run's data
(an exfiltration channel); the allow-list closes it to the hosts the deployment names. In a VPC
deployment the network's egress rules say the same again, outside the code.
"""

from __future__ import annotations

import urllib.parse
from collections.abc import Sequence

from langorch.domain.errors import StepFailedError

SETTING = "http_allowed_domains"
"""The setting's name, as errors tell it (``LANGORCH_HTTP_ALLOWED_DOMAINS``; cdk.json's
``http_allowed_domains``)."""


class EgressRefusedError(StepFailedError):
    """An ``http`` step's host is not in the deployment's domain allow-list: another attempt
    gets the same answer, so the step fails at once (its ``on_error`` route, if any, runs)."""


def host_of(url: str) -> str:
    """The lower-case host name of ``url`` (``""`` when it has none)."""
    return (urllib.parse.urlsplit(url).hostname or "").lower()


def host_allowed(host: str, domains: Sequence[str]) -> bool:
    """Whether ``host`` is one of ``domains``: ``example.com`` allows exactly that host,
    ``*.example.com`` (or ``.example.com``) its subdomains, not the domain itself."""
    host = host.lower().rstrip(".")
    for domain in domains:
        domain = domain.lower().rstrip(".")
        if domain.startswith(("*.", ".")):
            if host.endswith("." + domain.lstrip("*.")):
                return True
        elif host == domain:
            return True
    return False


def egress_refusal(url: str, domains: Sequence[str] | None) -> str | None:
    """Why ``url`` may not be called (``None``: it may; no allow-list allows every host).

    The message names the host, the allow-list and the setting to change.
    """
    if domains is None:
        return None
    host = host_of(url)
    if host and host_allowed(host, domains):
        return None
    allowed = ", ".join(domains) or "none"
    return (
        f"host {host or url[:60]!r} is not in {SETTING} ({allowed}); add it to "
        f"{SETTING} (cdk.json, or LANGORCH_HTTP_ALLOWED_DOMAINS locally) to allow it"
    )
