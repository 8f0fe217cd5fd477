"""Contract fixtures: one moto DynamoDB client per worker, reused in every test's fresh account."""

from __future__ import annotations

from typing import Any

import pytest


@pytest.fixture(scope="session")
def _dynamodb_client() -> Any:
    """A DynamoDB client whose requests are atomic, as DynamoDB's are (``tests/support/aws.py``).

    Building a client per test (the suite-wide fixture) cost ~8 s of the contracts' CPU. moto
    stubs every client, so this one reaches whichever ``mock_aws`` is open: each test's own,
    fresh account (the ``aws`` fixture). Only ``dynamodb`` below hands it out, after ``aws``.
    A test that registers a handler on it takes it off at its end (``test_runs_store``).
    """
    import boto3

    from tests.conftest import REGION
    from tests.support.aws import one_request_at_a_time

    client = boto3.session.Session(
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
        region_name=REGION,
    ).client("dynamodb")
    return one_request_at_a_time(client)


@pytest.fixture
def dynamodb(aws: None, _dynamodb_client: Any) -> Any:
    """moto's DynamoDB, in the test's fresh account (overrides ``tests/conftest.py``'s: the same
    client, built once)."""
    return _dynamodb_client
