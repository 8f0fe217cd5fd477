"""Local mode's email sender: every message written to a folder, and its approval link printed.

This is the only place local mode shows an approval link (on stdout, for the developer); nothing
logs it.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import sys
import tempfile
from datetime import UTC, datetime
from email.message import EmailMessage
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

if TYPE_CHECKING:
    from langorch.web.emails import OutgoingEmail

_SAFE = re.compile(r"[^A-Za-z0-9_.-]+")


class OutboxSender:
    """Writes each email as ``<stamp>-<approval>-<identity>.json`` and ``.eml`` under
    ``outbox_dir`` (``identity``: a digest of recipient, subject, link and text).

    Args:
        outbox_dir: the folder (created when missing).
        sender: the From address written into the ``.eml``.
        stdout: where the link is printed (default ``sys.stdout``).
    """

    def __init__(
        self,
        outbox_dir: str | Path,
        *,
        sender: str = "langorch@localhost",
        stdout: TextIO | None = None,
    ) -> None:
        self._dir = Path(outbox_dir)
        self._sender = sender
        self._stdout = stdout

    def send(self, email: OutgoingEmail) -> str:
        """Write the email and print its link; returns the file stem as the message id."""
        self._dir.mkdir(parents=True, exist_ok=True)
        approval = _SAFE.sub("_", email.approval_id)
        # The same message sent again (a request that died between sending and noting it
        # sent, then retried after a restart) is kept once, as a mailbox keeps one copy per
        # Message-ID. SES has no such key: deployed, that email arrives twice.
        identity = hashlib.sha256(
            "\n".join((email.to, email.subject, email.link, email.text)).encode("utf-8")
        ).hexdigest()[:16]
        for earlier in self._dir.glob(f"*-{approval}-{identity}*.json"):
            return earlier.stem
        stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S%fZ")
        base = f"{stamp}-{approval}-{identity}"
        stem = base
        counter = 1
        while (self._dir / f"{stem}.json").exists():
            counter += 1
            stem = f"{base}-{counter}"
        record = {
            "to": email.to,
            "subject": email.subject,
            "approval_id": email.approval_id,
            "link": email.link,
            "text": email.text,
            "html": email.html,
        }
        message = EmailMessage()
        message["From"] = self._sender
        message["To"] = email.to
        message["Subject"] = email.subject
        message.set_content(email.text)
        message.add_alternative(email.html, subtype="html")
        # The .eml first, then the .json readers look for: each appears whole or not at all.
        _write_atomically(self._dir / f"{stem}.eml", bytes(message))
        _write_atomically(self._dir / f"{stem}.json", json.dumps(record, indent=2).encode("utf-8"))
        out = self._stdout or sys.stdout
        print(f"approval email to {email.to}: {email.link}", file=out, flush=True)
        return stem


def _write_atomically(path: Path, data: bytes) -> None:
    """Write to a temporary file beside ``path`` and rename it into place (atomic on POSIX)."""
    fd, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as file:
            file.write(data)
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
