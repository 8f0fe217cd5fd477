"""Shared fixtures: AWS is moto, in-process; no test touches the network."""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from moto import mock_aws

REGION = "us-east-1"


@pytest.fixture(autouse=True)
def _no_real_aws(monkeypatch: pytest.MonkeyPatch) -> None:
    """Fake credentials so nothing can reach a real account by accident."""
    for name in ("AWS_PROFILE", "AWS_SESSION_TOKEN", "AWS_SECURITY_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setenv("AWS_DEFAULT_REGION", REGION)
    for name in list(os.environ):
        if name.startswith("LANGORCH_"):
            monkeypatch.delenv(name)


@pytest.fixture
def aws() -> Iterator[None]:
    """Every AWS call in the test goes to moto, in-process."""
    with mock_aws():
        yield


@pytest.fixture
def dynamodb(aws: None) -> Any:
    return boto3.client("dynamodb", region_name=REGION)


@pytest.fixture
def s3(aws: None) -> Any:
    return boto3.client("s3", region_name=REGION)


@pytest.fixture
def atomic_dynamodb() -> Iterator[None]:
    """moto's conditional writes made atomic across threads, as DynamoDB's are."""
    from langorch.local.emulator import serialise_dynamodb_writes

    undo = serialise_dynamodb_writes()
    yield
    undo()
