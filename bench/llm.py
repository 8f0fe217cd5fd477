"""What our code adds to one LLM call: langorch's call path vs the bare SDK, on loopback.

Run with ``make bench`` (``.venv/bin/python bench/llm.py``). A stdlib HTTP server on 127.0.0.1
answers every request at once with a fixed structured answer (OpenAI chat completions, Bedrock
Converse), so the figures are client-side cost only: no network, no model time.

For each provider, after a warm-up, the median wall time of one call (``CALLS`` calls):

* ``sdk``   — the bare SDK call with the same request shape (``AsyncOpenAI`` chat completion with
  a JSON-schema response format; boto3 ``converse`` with a forced tool), one attempt.
* ``ours``  — :func:`langorch.llm.calls.call_model` through the registry: LangChain's chat model,
  stop-reason checks, strict JSON reading, output validation, the step's budget and token tally.

``overhead`` = ours - sdk, per call. Nothing is asserted; the last line is ``BENCH_JSON {...}``.
"""

from __future__ import annotations

import asyncio
import json
import os
import socket
import statistics
import sys
import threading
import time
from collections.abc import Awaitable, Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "shared"))

CALLS = 40
WARMUP = 5

_COMPLETION = {
    "id": "chatcmpl-1",
    "object": "chat.completion",
    "created": 0,
    "model": "gpt-4o-mini",
    "choices": [
        {
            "index": 0,
            "message": {"role": "assistant", "content": json.dumps({"title": "Owls"})},
            "finish_reason": "stop",
            "logprobs": None,
        }
    ],
    "usage": {"prompt_tokens": 20, "completion_tokens": 5, "total_tokens": 25},
}
_CONVERSE = {
    "output": {
        "message": {
            "role": "assistant",
            "content": [
                {"toolUse": {"toolUseId": "t1", "name": "answer", "input": {"title": "Owls"}}}
            ],
        }
    },
    "stopReason": "tool_use",
    "usage": {"inputTokens": 20, "outputTokens": 5, "totalTokens": 25},
    "metrics": {"latencyMs": 1},
}
_SCHEMA = {
    "type": "object",
    "properties": {"title": {"type": "string"}},
    "required": ["title"],
    "additionalProperties": False,
}


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def setup(self) -> None:
        super().setup()
        # Headers and body go out in two writes: without this, Nagle's algorithm and delayed
        # ACKs add ~40 ms to every call and drown what is measured.
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length", "0")))
        body = json.dumps(_CONVERSE if "/converse" in self.path else _COMPLETION).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        pass


async def _median_ms(call: Callable[[], Awaitable[Any]]) -> float:
    for _ in range(WARMUP):
        await call()
    times = []
    for _ in range(CALLS):
        started = time.perf_counter()
        await call()
        times.append((time.perf_counter() - started) * 1000)
    return statistics.median(times)


def _request(provider: str) -> Any:
    from langorch.llm import LLMRequest

    return LLMRequest(
        run_id="bench",
        step_id="name",
        block_id="name_it",
        provider=provider,
        model=None,
        system_prompt="You name things.",
        prompt="Name a book about owls.",
        output_keys=["title"],
    )


async def _openai(url: str) -> dict[str, float]:
    import httpx
    import openai

    from langorch.llm import LLMRegistry
    from langorch.llm.calls import call_model

    # The same transport as ours (langorch hands ChatOpenAI an httpx.AsyncClient per loop).
    client = openai.AsyncOpenAI(
        base_url=f"{url}/v1", api_key="sk-bench", max_retries=0, http_client=httpx.AsyncClient()
    )
    messages: Any = [
        {"role": "system", "content": "You name things."},
        {"role": "user", "content": "Name a book about owls."},
    ]
    response_format: Any = {
        "type": "json_schema",
        "json_schema": {"name": "answer", "schema": _SCHEMA, "strict": True},
    }

    async def sdk() -> Any:
        return await client.chat.completions.create(
            model="gpt-4o-mini", messages=messages, response_format=response_format
        )

    registry = LLMRegistry(
        default_provider="openai", openai_api_key="sk-bench", openai_base_url=f"{url}/v1"
    )
    request = _request("openai")

    async def ours() -> Any:
        return await call_model(registry, request, budget_seconds=60)

    figures = {"sdk": await _median_ms(sdk), "ours": await _median_ms(ours)}
    await client.close()
    return figures


async def _bedrock(url: str) -> dict[str, float]:
    from langorch.adapters.aws import bedrock_runtime_client
    from langorch.llm import LLMRegistry
    from langorch.llm.calls import call_model

    client = bedrock_runtime_client(region="us-east-1", read_timeout=60, endpoint_url=url)
    tool = {"toolSpec": {"name": "answer", "inputSchema": {"json": _SCHEMA}}}

    async def sdk() -> Any:
        return client.converse(
            modelId="global.anthropic.claude-haiku-4-5-20251001-v1:0",
            system=[{"text": "You name things."}],
            messages=[{"role": "user", "content": [{"text": "Name a book about owls."}]}],
            toolConfig={"tools": [tool], "toolChoice": {"tool": {"name": "answer"}}},
        )

    registry = LLMRegistry(
        default_provider="bedrock",
        bedrock_client_factory=lambda timeout: bedrock_runtime_client(
            region="us-east-1", read_timeout=timeout, endpoint_url=url
        ),
    )
    request = _request("bedrock")

    async def ours() -> Any:
        return await call_model(registry, request, budget_seconds=60)

    return {"sdk": await _median_ms(sdk), "ours": await _median_ms(ours)}


def main() -> None:
    """Start the loopback server, measure both providers, print the table and BENCH_JSON."""
    for name in ("AWS_PROFILE", "AWS_SESSION_TOKEN"):
        os.environ.pop(name, None)
    os.environ["AWS_ACCESS_KEY_ID"] = "bench"
    os.environ["AWS_SECRET_ACCESS_KEY"] = "bench"  # noqa: S105 - the loopback server's
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        figures = {
            "openai": asyncio.run(_openai(url)),
            "bedrock": asyncio.run(_bedrock(url)),
        }
    finally:
        server.shutdown()
        server.server_close()
    print(f"LLM call overhead on loopback (median of {CALLS} calls, ms per call)")
    print(f"{'provider':<10}{'sdk':>10}{'ours':>10}{'overhead':>10}")
    result: dict[str, Any] = {}
    for provider, times in figures.items():
        overhead = times["ours"] - times["sdk"]
        print(f"{provider:<10}{times['sdk']:>10.2f}{times['ours']:>10.2f}{overhead:>10.2f}")
        result[provider] = {
            **{k: round(v, 2) for k, v in times.items()},
            "overhead": round(overhead, 2),
        }
    print("BENCH_JSON " + json.dumps({"llm_call_ms": result}, sort_keys=True))


if __name__ == "__main__":
    main()
