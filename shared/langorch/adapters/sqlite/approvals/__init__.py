"""Approvals in the local store: ``store`` (:class:`SqliteApprovals`, the ``ApprovalsStore``
port on SQLite) and ``_tables`` (the tables and the row <-> record mapping)."""

from langorch.adapters.sqlite.approvals.store import SqliteApprovals

__all__ = ["SqliteApprovals"]
