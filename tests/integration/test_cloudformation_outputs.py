"""Reading a deployed stack's outputs (moto CloudFormation)."""

from __future__ import annotations

import json
from typing import Any

import boto3
import pytest

from langorch.adapters.cloudformation import stack_outputs
from langorch.domain.errors import NotFoundError

TEMPLATE = {
    "Resources": {"Drop": {"Type": "AWS::S3::Bucket", "Properties": {"BucketName": "prod-bucket"}}},
    "Outputs": {
        "DefinitionsTable": {"Value": "prod-definitions"},
        "Bucket": {"Value": "prod-bucket"},
    },
}


@pytest.fixture
def cloudformation(aws: None) -> Any:
    return boto3.client("cloudformation", region_name="us-east-1")


def test_outputs_of_a_deployed_stack(cloudformation: Any) -> None:
    # Given a stack with two outputs
    cloudformation.create_stack(StackName="prod", TemplateBody=json.dumps(TEMPLATE))
    # When its outputs are read
    outputs = stack_outputs(cloudformation, "prod")
    # Then they come back by output key
    assert outputs == {"DefinitionsTable": "prod-definitions", "Bucket": "prod-bucket"}


def test_an_unknown_stack_is_not_found(cloudformation: Any) -> None:
    # Given no stack
    # When one is read
    # Then a NotFoundError names it
    with pytest.raises(NotFoundError, match="'nope'"):
        stack_outputs(cloudformation, "nope")
