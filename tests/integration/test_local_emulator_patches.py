"""The emulator's fixes keep the promises they touch: a DynamoDB transaction is all or nothing,
even with the narrow (per-item) backup that replaced moto's whole-table copy; a JSONPath parsed
once still reads each execution's own input."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError
from moto import mock_aws

from langorch.local.emulator import narrow_transaction_backups

TABLE = "patched"


@pytest.fixture
def table() -> Iterator[Any]:
    with mock_aws():
        undo = narrow_transaction_backups()
        client = boto3.client("dynamodb", region_name="us-east-1")
        client.create_table(
            TableName=TABLE,
            KeySchema=[
                {"AttributeName": "pk", "KeyType": "HASH"},
                {"AttributeName": "sk", "KeyType": "RANGE"},
            ],
            AttributeDefinitions=[
                {"AttributeName": "pk", "AttributeType": "S"},
                {"AttributeName": "sk", "AttributeType": "S"},
            ],
            BillingMode="PAY_PER_REQUEST",
        )
        client.put_item(
            TableName=TABLE, Item={"pk": {"S": "run"}, "sk": {"S": "a"}, "n": {"N": "1"}}
        )
        try:
            yield client
        finally:
            undo()


def _items(client: Any) -> dict[str, str]:
    found = client.scan(TableName=TABLE, ConsistentRead=True)["Items"]
    return {item["sk"]["S"]: item["n"]["N"] for item in found}


def _update(sk: str, condition: str) -> dict[str, Any]:
    return {
        "Update": {
            "TableName": TABLE,
            "Key": {"pk": {"S": "run"}, "sk": {"S": sk}},
            "UpdateExpression": "SET n = :n",
            "ConditionExpression": condition,
            "ExpressionAttributeValues": {":n": {"N": "2"}},
        }
    }


def test_a_transaction_that_fails_a_condition_changes_nothing(table: Any):
    # Given a transaction that puts a new item, updates an existing one, and then fails
    put = {
        "Put": {"TableName": TABLE, "Item": {"pk": {"S": "run"}, "sk": {"S": "b"}, "n": {"N": "5"}}}
    }
    failing = _update("c", "attribute_exists(pk)")

    # When it is applied
    with pytest.raises(ClientError) as refused:
        table.transact_write_items(
            TransactItems=[put, _update("a", "attribute_exists(pk)"), failing]
        )

    # Then it is cancelled and every item is as before: the new one absent, the old unchanged
    assert refused.value.response["Error"]["Code"] == "TransactionCanceledException"
    assert _items(table) == {"a": "1"}


def test_a_transaction_whose_conditions_hold_applies_every_write(table: Any):
    put = {
        "Put": {"TableName": TABLE, "Item": {"pk": {"S": "run"}, "sk": {"S": "b"}, "n": {"N": "5"}}}
    }

    table.transact_write_items(TransactItems=[put, _update("a", "attribute_exists(pk)")])

    assert _items(table) == {"a": "2", "b": "5"}


PATHS_MACHINE = {
    "StartAt": "Pick",
    "States": {
        "Pick": {
            "Type": "Pass",
            "Parameters": {"run_id.$": "$.run_id", "status.$": "$.status"},
            "ResultPath": "$.picked",
            "Next": "Route",
        },
        "Route": {
            "Type": "Choice",
            "Choices": [{"Variable": "$.picked.status", "StringEquals": "go", "Next": "Went"}],
            "Default": "Stayed",
        },
        "Went": {"Type": "Pass", "Result": "went", "ResultPath": "$.outcome", "End": True},
        "Stayed": {"Type": "Pass", "Result": "stayed", "ResultPath": "$.outcome", "End": True},
    },
}


def _outputs(arn: str, inputs: list[dict[str, str]], wave: str) -> list[dict[str, Any]]:
    """Each input run through the state machine ``arn`` in moto's interpreter, all at once."""
    client = boto3.client("stepfunctions", region_name="us-east-1")
    executions = [
        client.start_execution(stateMachineArn=arn, name=f"{wave}-{n}", input=json.dumps(given))[
            "executionArn"
        ]
        for n, given in enumerate(inputs)
    ]
    outputs = []
    for execution in executions:
        for _ in range(200):
            described = client.describe_execution(executionArn=execution)
            if described["status"] != "RUNNING":
                break
            time.sleep(0.05)
        assert described["status"] == "SUCCEEDED", described
        outputs.append(json.loads(described["output"]))
    return outputs


def test_paths_parsed_once_still_read_each_executions_own_input():
    from langorch.local.emulator import parse_each_json_path_once

    inputs = [{"run_id": f"run-{n}", "status": "go" if n % 2 else "stay"} for n in range(6)]
    with mock_aws(config={"stepfunctions": {"execute_state_machine": True}}):
        undo = parse_each_json_path_once()
        arn = boto3.client("stepfunctions", region_name="us-east-1").create_state_machine(
            name="paths",
            definition=json.dumps(PATHS_MACHINE),
            roleArn="arn:aws:iam::123456789012:role/states",
        )["stateMachineArn"]
        try:
            from moto.stepfunctions.parser.asl.utils import json_path

            assert json_path.parse("$.run_id") is json_path.parse("$.run_id")  # kept, not redone
            # The second wave reads every path parsed already, by the first.
            outputs = _outputs(arn, inputs, "first") + _outputs(arn, inputs[::-1], "second")
        finally:
            undo()
    expected = [
        {**given, "picked": given, "outcome": "went" if given["status"] == "go" else "stayed"}
        for given in inputs + inputs[::-1]
    ]
    assert outputs == expected


def test_an_update_without_a_stream_applies_and_a_stream_still_gets_the_old_image():
    from langorch.local.dynamodb_lean import copy_updated_items_only_for_streams

    keys = {
        "KeySchema": [{"AttributeName": "pk", "KeyType": "HASH"}],
        "AttributeDefinitions": [{"AttributeName": "pk", "AttributeType": "S"}],
        "BillingMode": "PAY_PER_REQUEST",
    }
    update = {
        "Key": {"pk": {"S": "run"}},
        "UpdateExpression": "SET n = :n",
        "ExpressionAttributeValues": {":n": {"N": "2"}},
    }
    with mock_aws():
        undo = copy_updated_items_only_for_streams()
        try:
            client = boto3.client("dynamodb", region_name="us-east-1")
            client.create_table(TableName="plain", **keys)
            client.create_table(
                TableName="streamed",
                StreamSpecification={"StreamEnabled": True, "StreamViewType": "NEW_AND_OLD_IMAGES"},
                **keys,
            )
            for table in ("plain", "streamed"):
                client.put_item(TableName=table, Item={"pk": {"S": "run"}, "n": {"N": "1"}})
                client.update_item(TableName=table, **update)
                item = client.get_item(TableName=table, Key=update["Key"])["Item"]
                assert item["n"] == {"N": "2"}
            # moto's stream of the table (its DescribeStream is not served in-process).
            from moto.dynamodb.models import dynamodb_backends

            shard = dynamodb_backends["123456789012"]["us-east-1"].tables["streamed"].stream_shard
            records = [record.to_json() for record in shard.items]
        finally:
            undo()
    modified = [r["dynamodb"] for r in records if r["eventName"] == "MODIFY"]
    assert [(m["OldImage"]["n"], m["NewImage"]["n"]) for m in modified] == [
        ({"N": "1"}, {"N": "2"})
    ]


def test_an_update_condition_parsed_once_still_decides_and_still_checks_its_values():
    from langorch.local.dynamodb_lean import parse_update_conditions_once

    with mock_aws():
        undo = parse_update_conditions_once()
        try:
            client = boto3.client("dynamodb", region_name="us-east-1")
            client.create_table(
                TableName="runs",
                KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
                AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
                BillingMode="PAY_PER_REQUEST",
            )
            client.put_item(TableName="runs", Item={"pk": {"S": "run"}, "n": {"N": "1"}})

            def update(condition: str, values: dict[str, Any]) -> None:
                client.update_item(
                    TableName="runs",
                    Key={"pk": {"S": "run"}},
                    UpdateExpression="SET n = :n",
                    ConditionExpression=condition,
                    ExpressionAttributeNames={"#n": "n"},
                    ExpressionAttributeValues={":n": {"N": "2"}, **values},
                )

            update("#n = :old", {":old": {"N": "1"}})  # holds: applied
            with pytest.raises(ClientError) as failed:
                update("#n = :old", {":old": {"N": "1"}})  # n is 2 now
            assert failed.value.response["Error"]["Code"] == "ConditionalCheckFailedException"
            with pytest.raises(ClientError) as unused:
                update("attribute_exists(#n)", {":spare": {"N": "9"}})
            assert "unused" in unused.value.response["Error"]["Message"]
            item = client.get_item(TableName="runs", Key={"pk": {"S": "run"}})["Item"]
        finally:
            undo()
    assert item["n"] == {"N": "2"}


def _waiting_on_a_token(client: Any) -> tuple[str, str]:
    """An execution waiting on its task token: its ARN and the token."""
    import io
    import zipfile

    archive = io.BytesIO()
    with zipfile.ZipFile(archive, "w") as zipped:
        zipped.writestr("h.py", "def handler(event, context):\n    return {}\n")
    iam = boto3.client("iam", region_name="us-east-1")
    role = iam.create_role(RoleName="waits", AssumeRolePolicyDocument="{}")["Role"]["Arn"]
    function = boto3.client("lambda", region_name="us-east-1").create_function(
        FunctionName="asks",
        Runtime="python3.12",
        Role=role,
        Handler="h.handler",
        Code={"ZipFile": archive.getvalue()},
    )["FunctionArn"]
    task = {
        "Type": "Task",
        "Resource": "arn:aws:states:::lambda:invoke.waitForTaskToken",
        "Parameters": {"FunctionName": function, "Payload": {"token.$": "$$.Task.Token"}},
        "TimeoutSeconds": 3600,
        "End": True,
    }
    machine = client.create_state_machine(
        name="waits",
        definition=json.dumps({"StartAt": "Wait", "States": {"Wait": task}}),
        roleArn=role,
    )["stateMachineArn"]
    execution = client.start_execution(stateMachineArn=machine, name="run-1", input="{}")
    arn = execution["executionArn"]
    for _ in range(200):
        for event in client.get_execution_history(executionArn=arn)["events"]:
            if event["type"] == "TaskScheduled":
                parameters = json.loads(event["taskScheduledEventDetails"]["parameters"])
                return arn, str(parameters["Payload"]["token"])
        time.sleep(0.05)
    raise AssertionError("the execution never scheduled its task")


def test_a_stopped_execution_waiting_on_a_token_ends_aborted_and_refuses_the_token():
    from langorch.local.emulator import stop_ends_task_waits

    config: Any = {
        "stepfunctions": {"execute_state_machine": True},
        "lambda": {"use_docker": False},
    }
    with mock_aws(config=config):
        undo = stop_ends_task_waits()
        try:
            client = boto3.client("stepfunctions", region_name="us-east-1")
            # Given an execution waiting on its task token (an approval's)
            arn, token = _waiting_on_a_token(client)
            # When it is stopped
            client.stop_execution(executionArn=arn, cause="stopped from the console")
            # Then it ends ABORTED, as Step Functions ends it, not RUNNING until its timeout
            for _ in range(200):
                status = client.describe_execution(executionArn=arn)["status"]
                if status != "RUNNING":
                    break
                time.sleep(0.05)
            assert status == "ABORTED"
            # ... and its token is refused: nothing is told it resumed
            with pytest.raises(ClientError) as refused:
                client.send_task_success(taskToken=token, output="{}")
            assert refused.value.response["Error"]["Code"] in ("TaskDoesNotExist", "InvalidToken")
        finally:
            undo()
