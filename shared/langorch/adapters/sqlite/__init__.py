"""The embedded default's stores: one SQLite file (WAL) behind the same ports as DynamoDB.

``langorch dev``, ``runs start --local`` and the tests' local stack keep runs, approvals,
definitions, checkpoints, memory, secrets, schedules and log lines here; the cloud keeps them in
DynamoDB (:mod:`langorch.adapters.dynamodb`). Every store passes the same contract suite as its
DynamoDB adapter and its in-memory fake (``tests/contracts``). :mod:`._db` is the file: its
connections, its transactions, its schema version.
"""
