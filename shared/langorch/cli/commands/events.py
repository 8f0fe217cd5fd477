"""``langorch events send``: put one EventBridge event (it starts workflows whose event trigger
matches)."""

from __future__ import annotations

import argparse
from typing import Any

from langorch.cli.context import Context
from langorch.cli.errors import UsageError
from langorch.cli.registry import Subparsers, add_command, add_group

MAX_DETAIL_BYTES = 256 * 1024
"""EventBridge's limit on one entry (the detail is most of it)."""


def register(subparsers: Subparsers) -> None:
    """Add the ``events`` group."""
    events = add_group(subparsers, "events", "put events on an EventBridge bus")
    send = add_command(
        events, "send", _send, "put one event; workflows with a matching event trigger start"
    )
    send.add_argument("--bus", default="default", help="the event bus (default: default)")
    send.add_argument("--source", required=True, help="the event's source, e.g. shop.orders")
    send.add_argument(
        "--detail-type", required=True, help='the event\'s detail-type, e.g. "Order Placed"'
    )
    send.add_argument("--detail", default="{}", help="the event's detail: a JSON object")


def _detail(text: str) -> dict[str, Any]:
    from langorch.domain.errors import LangorchError
    from langorch.domain.limits import loads_strict

    if len(text.encode("utf-8")) > MAX_DETAIL_BYTES:
        raise UsageError(f"--detail is over EventBridge's {MAX_DETAIL_BYTES} bytes per event")
    try:
        detail = loads_strict(text, "detail")
    except LangorchError as exc:
        raise UsageError(f"--detail: {exc}") from None
    if not isinstance(detail, dict):
        raise UsageError('--detail must be a JSON object, e.g. --detail \'{"order_id": "o-1"}\'')
    return detail


def _send(ctx: Context, args: argparse.Namespace) -> None:
    if not args.source.strip() or not args.detail_type.strip():
        raise UsageError("--source and --detail-type must not be empty")
    detail = _detail(args.detail)
    put = ctx.container.events.put(args.bus, args.source, args.detail_type, detail)
    document: dict[str, Any] = {
        "event_id": put.event_id,
        "bus": put.bus,
        "delivered_to": put.delivered_to,
    }

    def text() -> str:
        line = f"put event {put.event_id} on bus {put.bus}"
        if put.delivered_to is None:
            return line + " (the bus's rules start the matching workflows)"
        if not put.delivered_to:
            return line + "\nno workflow has an event trigger matching it: nothing starts"
        return line + f"\nstarted (or found) a run of: {', '.join(put.delivered_to)}"

    ctx.out.result(document, text)
