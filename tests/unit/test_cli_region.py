"""``--stack`` finds the stack where the AWS CLI would look: the SDK's region resolution."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import pytest

from langorch.cli.target import StackOutputs, resolve_target
from langorch.config import Settings
from tests.support.cli import STACK_OUTPUTS as OUTPUTS


def _recording(seen: list[str]) -> StackOutputs:
    def read(stack: str, settings: Settings) -> Mapping[str, str]:
        seen.append(settings.region)
        return OUTPUTS

    return read


def _profiles(regions: Mapping[str | None, str]) -> object:
    def region_of(profile: str | None) -> str | None:
        return regions.get(profile)

    return region_of


@pytest.mark.parametrize(
    ("env", "region_flag", "expected"),
    [
        # --region and LANGORCH_REGION win over the AWS configuration
        ({"AWS_REGION": "eu-west-1"}, "ap-south-1", "ap-south-1"),
        ({"LANGORCH_REGION": "us-west-2", "AWS_REGION": "eu-west-1"}, None, "us-west-2"),
        # then the SDK's order: AWS_REGION, AWS_DEFAULT_REGION, the profile's region
        ({"AWS_REGION": "eu-west-1", "AWS_DEFAULT_REGION": "eu-north-1"}, None, "eu-west-1"),
        ({"AWS_DEFAULT_REGION": "eu-north-1"}, None, "eu-north-1"),
        ({"AWS_PROFILE": "work"}, None, "eu-central-1"),
        ({}, None, "ca-central-1"),
    ],
)
def test_a_stack_is_looked_up_in_the_region_the_aws_configuration_names(
    tmp_path: Path, env: dict[str, str], region_flag: str | None, expected: str
) -> None:
    # Given an AWS configuration whose default profile is in ca-central-1, "work" in eu-central-1
    seen: list[str] = []
    profiles = _profiles({None: "ca-central-1", "work": "eu-central-1"})
    # When a stack is named
    target = resolve_target(
        stack="prod",
        region=region_flag,
        env=env,
        cwd=tmp_path,
        outputs=_recording(seen),
        profile_region=profiles,  # type: ignore[arg-type]
    )
    # Then its outputs are read, and its resources used, in that region
    assert seen == [expected]
    assert target.settings.region == expected


def test_without_any_aws_region_the_default_stays(tmp_path: Path) -> None:
    seen: list[str] = []
    target = resolve_target(
        stack="prod",
        env={},
        cwd=tmp_path,
        outputs=_recording(seen),
        profile_region=_profiles({}),  # type: ignore[arg-type]
    )
    assert target.settings.region == Settings().region == seen[0]
