"""Approvals in the runs table: ``repository`` (the record, secrets, votes, audit), ``_items``
(the item layout), ``guards`` (code attempts, used view tokens) and ``votes`` (vote, delegation
and timer requests)."""
