"""``langorch keys rotate``: a new approval-link signing key, the previous ones still verify.

Key material is never printed; only key ids.
"""

from __future__ import annotations

import argparse

from langorch.cli.context import Context
from langorch.cli.registry import Subparsers, add_command, add_group


def register(subparsers: Subparsers) -> None:
    """Add the ``keys`` group."""
    keys = add_group(subparsers, "keys", "rotate the approval-link signing key")
    rotate = add_command(
        keys,
        "rotate",
        _rotate,
        "make a fresh key current; links already emailed keep verifying with the kept keys",
    )
    rotate.add_argument(
        "--keep",
        type=int,
        default=None,
        metavar="N",
        help="keys that keep verifying, the new one included (default 2: rotate no more "
        "often than the longest approval timeout, or keep more)",
    )


def _rotate(ctx: Context, args: argparse.Namespace) -> int:
    from langorch.app.approvals.rotation import DEFAULT_KEEP, rotate_signing_key

    name = ctx.settings.link_signing_secret
    keep = DEFAULT_KEEP if args.keep is None else args.keep
    rotation = rotate_signing_key(ctx.container.secrets, name, keep=keep)
    dropped = f"; no longer verifying: {', '.join(rotation.dropped)}" if rotation.dropped else ""
    ctx.out.result(
        {
            "current": rotation.current,
            "previous": rotation.previous,
            "kept": list(rotation.kept),
            "dropped": list(rotation.dropped),
        },
        f"signing with {rotation.current} (was {rotation.previous}); verifying "
        f"{', '.join(rotation.kept)}{dropped}. Running functions pick the new key up within "
        "5 minutes.",
    )
    return 0
