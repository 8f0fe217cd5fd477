"""`langorch dev`'s state outlives the stack: stop it, start it again on the same home.

The real emulator in server mode on free loopback ports; nothing inside langorch is replaced.
(The crash case — SIGKILL of a `langorch dev` process with runs in flight — is
``test_dev_restart.py``.)
"""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from langorch.composition.container import Container
from langorch.local.stack import PortBusyError, free_port, start_local_stack


def test_tables_objects_secrets_and_the_signing_key_survive_a_restart(tmp_path: Path) -> None:
    # Given a stack that stored an item, an object and a secret, then stopped
    home = tmp_path / ".langorch"
    first = start_local_stack(home=home, port=free_port(), examples=None)
    try:
        settings = first.settings
        container = Container(settings)
        container.client("dynamodb").put_item(
            TableName=settings.runs_table,
            Item={"pk": {"S": "probe#1"}, "sk": {"S": "probe"}, "value": {"S": "kept"}},
        )
        container.client("s3").put_object(Bucket=settings.bucket, Key="in/a b+c.txt", Body=b"hi")
        container.secrets.put_json("probe/secret", {"value": "s3cret"})
        signing_key = container.secrets.get_json(settings.link_signing_secret)
    finally:
        first.stop()

    # When a new stack starts on the same home (another emulator port)
    second = start_local_stack(home=home, port=free_port(), examples=None)
    try:
        settings = second.settings
        container = Container(settings)
        # Then the item, the object, the secret and the signing key are all there, unchanged
        item = container.client("dynamodb").get_item(
            TableName=settings.runs_table,
            Key={"pk": {"S": "probe#1"}, "sk": {"S": "probe"}},
            ConsistentRead=True,
        )["Item"]
        assert item["value"] == {"S": "kept"}
        body = container.client("s3").get_object(Bucket=settings.bucket, Key="in/a b+c.txt")
        assert body["Body"].read() == b"hi"
        assert container.secrets.get_json("probe/secret") == {"value": "s3cret"}
        assert container.secrets.get_json(settings.link_signing_secret) == signing_key
    finally:
        second.stop()


def test_the_dynamodb_process_killed_under_the_stack_comes_back_on_its_port_with_every_write(
    tmp_path: Path,
) -> None:
    import os
    import signal
    import time

    from botocore.exceptions import BotoCoreError, ClientError

    # Given a running stack that stored an item
    stack = start_local_stack(home=tmp_path / ".langorch", port=free_port(), examples=None)
    try:
        settings = stack.settings
        dynamodb = Container(settings).client("dynamodb")
        key = {"pk": {"S": "probe#2"}, "sk": {"S": "probe"}}
        dynamodb.put_item(TableName=settings.runs_table, Item={**key, "value": {"S": "kept"}})
        assert stack.dynamodb is not None
        killed = stack.dynamodb.pid

        # When its DynamoDB process is killed
        os.kill(killed, signal.SIGKILL)

        # Then it is started again, on the same endpoint, and the item is there
        deadline = time.monotonic() + 60
        item = None
        while item is None and time.monotonic() < deadline:
            try:
                item = dynamodb.get_item(
                    TableName=settings.runs_table, Key=key, ConsistentRead=True
                ).get("Item")
            except (BotoCoreError, ClientError):
                time.sleep(0.2)  # refused while it restarts
        assert item is not None and item["value"] == {"S": "kept"}
        assert stack.dynamodb.pid != killed and stack.dynamodb.restarts == 1
        assert settings.dynamodb_endpoint_url == stack.dynamodb.endpoint_url
    finally:
        stack.stop()


def test_a_refused_write_is_not_replayed(tmp_path: Path) -> None:
    # Given a conditional put that failed its condition, then a restart
    home = tmp_path / ".langorch"
    first = start_local_stack(home=home, port=free_port(), examples=None)
    try:
        client, table = Container(first.settings).client("dynamodb"), first.settings.runs_table
        key = {"pk": {"S": "probe#2"}, "sk": {"S": "probe"}}
        client.put_item(TableName=table, Item={**key, "n": {"N": "1"}})
        with pytest.raises(client.exceptions.ConditionalCheckFailedException):
            client.put_item(
                TableName=table,
                Item={**key, "n": {"N": "2"}},
                ConditionExpression="attribute_not_exists(pk)",
            )
    finally:
        first.stop()
    second = start_local_stack(home=home, port=free_port(), examples=None)
    try:
        # When the item is read back
        client = Container(second.settings).client("dynamodb")
        item = client.get_item(TableName=table, Key=key, ConsistentRead=True)["Item"]
        # Then it has the value that won, not the refused one
        assert item["n"] == {"N": "1"}
    finally:
        second.stop()


def test_a_busy_gateway_port_fails_at_once_naming_the_option(tmp_path: Path) -> None:
    # Given something listening on the port asked for the gateway
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        # When a stack is started on it
        with pytest.raises(PortBusyError) as raised:
            start_local_stack(home=tmp_path, port=free_port(), gateway_port=port)
    # Then it fails before starting anything, naming the port and the option to change it
    assert f"127.0.0.1:{port}" in str(raised.value)
    assert "--port" in str(raised.value)
    assert not (tmp_path / "stack.json").exists()


def test_a_busy_emulator_port_fails_at_once_naming_the_option(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with pytest.raises(PortBusyError) as raised:
            start_local_stack(home=tmp_path, port=port)
    assert "--emulator-port" in str(raised.value)


def test_langorch_dev_on_a_busy_port_exits_at_once_with_the_reason_and_the_hint(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from langorch.cli.main import main

    (tmp_path / "none").mkdir()
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        # When `langorch dev` is asked for the taken port
        code = main(
            [
                "dev",
                "--ready-only",
                "--port",
                str(port),
                "--emulator-port",
                str(free_port()),
                "--home",
                str(tmp_path / "home"),
                "--examples",
                str(tmp_path / "none"),
            ]
        )
    # Then it exits non-zero, saying which port is taken and how to pick another
    err = capsys.readouterr().err
    assert code != 0
    assert f"127.0.0.1:{port}" in err and "--port PORT" in err
