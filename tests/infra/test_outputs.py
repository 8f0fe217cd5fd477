"""Stack outputs: what `langorch … --stack NAME` reads."""

from __future__ import annotations

from langorch.cli.target import OUTPUT_FIELDS
from tests.infra.conftest import Synth


def test_every_output_the_cli_reads_exists(synth: Synth) -> None:
    outputs = synth.template["Outputs"]
    for key in OUTPUT_FIELDS:
        assert key in outputs, key


def test_outputs_name_the_deployed_resources(synth: Synth) -> None:
    outputs = synth.template["Outputs"]
    stack = synth.stack
    assert outputs["DefinitionsTable"]["Value"] == {
        "Ref": synth.logical_id(stack.tables.definitions)
    }
    assert outputs["Bucket"]["Value"] == {"Ref": synth.logical_id(stack.files.bucket)}
    assert outputs["StateMachineArn"]["Value"] == {
        "Ref": synth.logical_id(stack.workflow.state_machine)
    }
    assert outputs["ApiUrl"]["Value"] == {
        "Fn::GetAtt": [synth.logical_id(stack.api.api), "ApiEndpoint"]
    }
    for key in ("TriggerFunctionArn", "SchedulerRoleArn", "SchedulerGroup", "LogGroupPrefix"):
        assert key in outputs
