"""``langorch hooks send``: deliver a signed webhook, exactly as an external sender would.

It signs with the ``standardwebhooks`` library, the way any Standard Webhooks sender does
(``webhook-id``, ``webhook-timestamp``, ``webhook-signature``). The secret is read from Secrets
Manager (the caller needs read access to it) and never printed; the request goes to the stack's
public URL (the local gateway, or the deployed HTTP API).
"""

from __future__ import annotations

import argparse
import json
import time
import uuid
from typing import Any

from langorch.cli.commands._definitions import require_webhook
from langorch.cli.context import Context
from langorch.cli.errors import UsageError
from langorch.cli.registry import Subparsers, add_command, add_group
from langorch.domain.errors import NotFoundError

TIMEOUT_SECONDS = 30


def register(subparsers: Subparsers) -> None:
    """Add the ``hooks`` group."""
    hooks = add_group(subparsers, "hooks", "deliver signed webhooks")
    send = add_command(hooks, "send", _send, "POST a signed webhook that starts a run")
    send.add_argument("workflow", help="the workflow id (it needs a webhook trigger)")
    send.add_argument("--input", default="{}", metavar="JSON", help="the JSON body")
    send.add_argument("--delivery", help="delivery id (default: a new one; repeat it to dedupe)")


def _send(ctx: Context, args: argparse.Namespace) -> int:
    # Imported here, as every command's heavier imports are: only a send pays for them.
    import urllib.error
    import urllib.request
    from datetime import UTC, datetime

    from standardwebhooks import Webhook

    from langorch.domain.errors import JsonInputError
    from langorch.domain.limits import loads_strict
    from langorch.domain.webhooks import standard_secret

    try:
        body_value = loads_strict(args.input, "--input")
    except JsonInputError as exc:
        raise UsageError(str(exc)) from exc
    settings = ctx.settings
    require_webhook(ctx, args.workflow)
    try:
        secret = ctx.container.secrets.get_json(settings.webhook_secret_prefix + args.workflow)
    except NotFoundError:
        raise NotFoundError(
            f"workflow {args.workflow} has a webhook trigger but no webhook secret in "
            f"{ctx.target().name}: `langorch workflows put` its file (it creates the secret) "
            f"or `langorch workflows rotate-secret {args.workflow}`"
        ) from None
    payload = json.dumps(body_value)
    body = payload.encode()
    delivery = args.delivery or f"cli-{uuid.uuid4().hex}"
    timestamp = int(time.time())
    # standard_secret: a secret stored before Standard Webhooks has no whsec_ prefix.
    signature = Webhook(standard_secret(str(secret["current"]))).sign(
        delivery, datetime.fromtimestamp(timestamp, UTC), payload
    )
    headers = {
        "Content-Type": "application/json",
        "webhook-id": delivery,
        "webhook-timestamp": str(timestamp),
        "webhook-signature": signature,
    }
    url = f"{settings.public_base_url.rstrip('/')}/hooks/{args.workflow}"
    request = urllib.request.Request(url, data=body, headers=headers, method="POST")  # noqa: S310
    try:
        with urllib.request.urlopen(request, timeout=TIMEOUT_SECONDS) as response:  # noqa: S310
            status, text = response.status, response.read().decode()
    except urllib.error.HTTPError as exc:
        status, text = exc.code, exc.read().decode()
    except urllib.error.URLError as exc:
        raise UsageError(f"cannot reach {url}: {exc.reason}") from exc
    answer: Any = json.loads(text) if text.strip().startswith("{") else {"body": text}
    ctx.out.result(
        {"status": status, "delivery": delivery, **answer},
        f"{status} {json.dumps(answer)}  (delivery {delivery})",
    )
    return 0 if status < 300 else 1
