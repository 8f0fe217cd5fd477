"""The local DynamoDB process's CPU per call, under the mix of calls a run makes.

Run with ``.venv/bin/python bench/dynamodb_process.py [--calls 2000] [--threads 8]``. Fully
offline: it starts ``python -m langorch.local.dynamodb_process`` as the local stack does (a
state folder, so writes are journaled), creates one table (``pk``/``sk`` strings), seeds a few
items, then drives ``--calls`` calls from ``--threads`` threads through boto3, each thread
cycling through the mix the runner makes:

- GetItem of a run record;
- UpdateItem with a condition (``attribute_exists`` and a version compare) that SETs two
  attributes and REMOVEs one — every fifth one fails its condition on purpose;
- TransactWriteItems: a ConditionCheck on the run record plus one or two ~2 KB Puts
  (checkpoint and timeline entries);
- Query of one partition, ``Limit=1``, ``ScanIndexForward=False`` (the latest checkpoint);
- BatchWriteItem of two small items.

It prints the process's CPU seconds (user + system, from ``/proc/<pid>/stat``) per 1,000
calls and the wall time of the driven calls, measured from the first to the last call (the
process's start and the seeding are excluded). Nothing is asserted; the last line is
``BENCH_JSON {...}``. Compare CPU per 1,000 calls between builds on the same machine: wall
time depends on what else the machine runs.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import boto3
from botocore.config import Config
from botocore.exceptions import ClientError

TABLE = "bench-runs"
RUNS = 40
PAYLOAD = "x" * 2000


def _cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    # utime and stime are fields 14 and 15 of the whole line (1-based), in clock ticks.
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _client(endpoint: str) -> Any:
    return boto3.client(
        "dynamodb",
        endpoint_url=endpoint,
        region_name="us-east-1",
        aws_access_key_id="testing",
        aws_secret_access_key="testing",  # noqa: S106 - moto's, not a secret
        config=Config(max_pool_connections=16, retries={"max_attempts": 1}),
    )


def _setup(client: Any) -> None:
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
    for run in range(RUNS):
        client.put_item(
            TableName=TABLE,
            Item={
                "pk": {"S": f"run#{run}"},
                "sk": {"S": "record"},
                "version": {"N": "0"},
                "status": {"S": "running"},
                "lease": {"S": "none"},
            },
        )


def _call(client: Any, index: int) -> None:
    run = f"run#{index % RUNS}"
    kind = index % 5
    if kind == 0:
        client.get_item(TableName=TABLE, Key={"pk": {"S": run}, "sk": {"S": "record"}})
    elif kind == 1:
        expected = "999999" if index % 25 == 1 else "0"  # every fifth update fails
        try:
            client.update_item(
                TableName=TABLE,
                Key={"pk": {"S": run}, "sk": {"S": "record"}},
                UpdateExpression="SET #s = :s, #l = :l REMOVE #x",
                ConditionExpression="attribute_exists(pk) AND #v >= :v",
                ExpressionAttributeNames={
                    "#s": "status",
                    "#l": "lease",
                    "#x": "stale",
                    "#v": "version",
                },
                ExpressionAttributeValues={
                    ":s": {"S": "running"},
                    ":l": {"S": f"lease-{index}"},
                    ":v": {"N": expected},
                },
            )
        except ClientError as error:
            if error.response["Error"]["Code"] != "ConditionalCheckFailedException":
                raise
    elif kind == 2:
        puts = [
            {
                "Put": {
                    "TableName": TABLE,
                    "Item": {
                        "pk": {"S": run},
                        "sk": {"S": f"ckpt#{index:08d}#{n}"},
                        "data": {"S": PAYLOAD},
                    },
                }
            }
            for n in range(1 + index % 2)
        ]
        check = {
            "ConditionCheck": {
                "TableName": TABLE,
                "Key": {"pk": {"S": run}, "sk": {"S": "record"}},
                "ConditionExpression": "attribute_exists(pk)",
            }
        }
        client.transact_write_items(TransactItems=[check, *puts])
    elif kind == 3:
        client.query(
            TableName=TABLE,
            KeyConditionExpression="pk = :pk",
            ExpressionAttributeValues={":pk": {"S": run}},
            Limit=1,
            ScanIndexForward=False,
        )
    else:
        client.batch_write_item(
            RequestItems={
                TABLE: [
                    {"PutRequest": {"Item": {"pk": {"S": run}, "sk": {"S": f"tl#{index:08d}#{n}"}}}}
                    for n in range(2)
                ]
            }
        )


def main() -> int:
    """Start the process, drive the calls, print the figures."""
    parser = argparse.ArgumentParser(prog="bench/dynamodb_process.py")
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--threads", type=int, default=8)
    args = parser.parse_args()
    from langorch.local.dynamodb_process import start_dynamodb_process

    with tempfile.TemporaryDirectory() as folder:
        process = start_dynamodb_process(Path(folder))
        try:
            client = _client(process.wait_ready())
            _setup(client)
            counter = iter(range(args.calls))
            lock = threading.Lock()

            def work() -> None:
                own = _client(client.meta.endpoint_url)
                while True:
                    with lock:
                        index = next(counter, None)
                    if index is None:
                        return
                    _call(own, index)

            workers = [threading.Thread(target=work) for _ in range(args.threads)]
            cpu_before = _cpu_seconds(process.pid)
            started = time.perf_counter()
            for worker in workers:
                worker.start()
            for worker in workers:
                worker.join()
            wall = time.perf_counter() - started
            cpu = _cpu_seconds(process.pid) - cpu_before
        finally:
            process.stop()
    figures = {
        "calls": args.calls,
        "threads": args.threads,
        "cpu_s_per_1000_calls": round(cpu * 1000 / args.calls, 3),
        "wall_s": round(wall, 2),
        "calls_per_s": round(args.calls / wall, 1),
    }
    print(
        f"DynamoDB process: {figures['cpu_s_per_1000_calls']} CPU s per 1,000 calls, "
        f"{args.calls} calls in {figures['wall_s']} s ({figures['calls_per_s']} calls/s)"
    )
    print("BENCH_JSON " + json.dumps(figures))
    return 0


if __name__ == "__main__":
    sys.exit(main())
