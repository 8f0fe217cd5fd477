"""Loopback LLM servers for tests: an OpenAI-compatible API, Anthropic's Messages API and a
Bedrock Converse endpoint.

Each is stdlib ``http.server`` in a thread on 127.0.0.1, answer from a script, and count what
they receive, so a test drives the real SDKs (openai via langchain-openai, anthropic via
langchain-anthropic, boto3 via langchain-aws) and checks how many calls were paid for. A
scripted reply can be held back (``delay``): the handler then watches its socket and records
when the client hangs up, which is how a test sees that a cancelled call really abandoned its
HTTP request.
"""

from __future__ import annotations

import json
import select
import socket
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from tests.support.polling import PATIENCE


@dataclass
class Reply:
    """One scripted answer."""

    status: int
    body: dict[str, Any]
    headers: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0
    """Seconds to hold the answer back (the client may hang up meanwhile)."""


@dataclass
class Received:
    """One request the server received."""

    path: str
    body: dict[str, Any]
    headers: dict[str, str]
    """Names in lower case."""
    at: float
    held_open: int = 0
    """Earlier held-back requests whose client had not hung up when this one arrived: a
    client that abandons a call before sending the next makes this 0 (its close reaches
    the server before its next request does), however late the hold's watcher notices."""


def _closed_by_client(connection: socket.socket) -> bool:
    """Whether the client closed ``connection`` (its end-of-stream is waiting), without blocking."""
    try:
        return connection.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT) == b""
    except BlockingIOError:
        return False
    except OSError:
        return True


class LoopbackServer:
    """A scripted JSON server; the last reply repeats when the script runs out."""

    def __init__(self) -> None:
        self.replies: list[Reply] = []
        self.received: list[Received] = []
        self.hangups: list[float] = []
        """When clients closed the connection before their (delayed) reply (monotonic)."""
        self._held: list[socket.socket] = []
        self._stop = threading.Event()
        self._lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length", "0"))
                raw = self.rfile.read(length)
                headers = {name.lower(): value for name, value in self.headers.items()}
                reply = server._record(self.path, raw, headers)
                if reply.delay and not server._hold(self.connection, reply.delay):
                    self.close_connection = True
                    return
                data = json.dumps(reply.body).encode()
                try:
                    self.send_response(reply.status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    for name, value in reply.headers.items():
                        self.send_header(name, value)
                    self.end_headers()
                    self.wfile.write(data)
                except OSError:
                    self.close_connection = True

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"

    @property
    def hung_up(self) -> int:
        """Requests whose client hung up before the (delayed) reply."""
        return len(self.hangups)

    @property
    def calls(self) -> int:
        """How many requests arrived."""
        return len(self.received)

    def _record(self, path: str, raw: bytes, headers: dict[str, str]) -> Reply:
        with self._lock:
            body = json.loads(raw) if raw else {}
            held_open = sum(1 for held in self._held if not _closed_by_client(held))
            self.received.append(Received(path, body, headers, time.monotonic(), held_open))
            if not self.replies:
                return Reply(500, {"message": "no reply scripted"})
            return self.replies.pop(0) if len(self.replies) > 1 else self.replies[0]

    def _hold(self, connection: socket.socket, seconds: float) -> bool:
        """Wait ``seconds``; False as soon as the client hangs up (or the server stops)."""
        deadline = time.monotonic() + seconds
        with self._lock:
            self._held.append(connection)
        try:
            # poll, not select: select refuses a descriptor numbered 1024 or more, which a
            # long-lived test worker's sockets reach
            watch = select.poll()
            watch.register(connection, select.POLLIN)
            while time.monotonic() < deadline and not self._stop.is_set():
                readable = watch.poll(20)
                if readable and _closed_by_client(connection):
                    with self._lock:
                        self.hangups.append(time.monotonic())
                    return False
            return not self._stop.is_set()
        finally:
            with self._lock:
                self._held.remove(connection)

    def wait_for(self, condition: Any, timeout: float = 60.0) -> bool:
        """Poll ``condition()`` until it is true or ``timeout`` seconds (times
        ``LANGORCH_TEST_PATIENCE``) pass: the deadline only stops a hung test."""
        deadline = time.monotonic() + timeout * PATIENCE
        while time.monotonic() < deadline:
            if condition():
                return True
            time.sleep(0.01)
        return bool(condition())

    @contextmanager
    def running(self) -> Iterator[LoopbackServer]:
        thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        thread.start()
        try:
            yield self
        finally:
            self._stop.set()
            self.server.shutdown()
            self.server.server_close()


# --- OpenAI chat completions ----------------------------------------------------------------


class FakeOpenAI(LoopbackServer):
    """``POST /v1/chat/completions``; ``base_url`` is what ``openai_base_url`` takes."""

    @property
    def base_url(self) -> str:
        return f"{self.url}/v1"

    def answer(
        self,
        content: Any,
        *,
        finish: str = "stop",
        prompt_tokens: int = 10,
        completion_tokens: int = 5,
        delay: float = 0.0,
        refusal: str | None = None,
    ) -> None:
        """Queue a completion whose message content is ``content`` (JSON-encoded unless str)."""
        text = content if isinstance(content, str) or content is None else json.dumps(content)
        message: dict[str, Any] = {"role": "assistant", "content": text, "refusal": refusal}
        self.replies.append(
            Reply(200, completion(message, finish, prompt_tokens, completion_tokens), delay=delay)
        )

    def embeddings(self, vectors: list[list[float]], *, model: str = "m") -> None:
        """Queue a ``POST /v1/embeddings`` answer: one vector per input text."""
        data = [
            {"object": "embedding", "index": i, "embedding": vector}
            for i, vector in enumerate(vectors)
        ]
        usage = {"prompt_tokens": 1, "total_tokens": 1}
        self.replies.append(
            Reply(200, {"object": "list", "data": data, "model": model, "usage": usage})
        )

    def error(self, status: int, message: str, headers: dict[str, str] | None = None) -> None:
        """Queue an OpenAI-shaped error."""
        body = {"error": {"message": message, "type": "error", "code": None}}
        self.replies.append(Reply(status, body, headers or {}))


def completion(
    message: dict[str, Any], finish: str, prompt_tokens: int, completion_tokens: int
) -> dict[str, Any]:
    """A chat.completion document."""
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "created": 0,
        "model": "gpt-4o-mini",
        "choices": [{"index": 0, "message": message, "finish_reason": finish, "logprobs": None}],
        "usage": {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
        },
    }


# --- Tool-calling chat APIs (Anthropic Messages, Bedrock Converse) ----------------------------


@dataclass(frozen=True)
class ChatApi:
    """How one chat API spells what a ``ToolChatServer`` queues."""

    tool_use: Callable[[dict[str, Any]], dict[str, Any]]
    """The content block calling the ``answer`` tool with the given input."""
    text_block: Callable[[str], dict[str, Any]]
    document: Callable[[list[dict[str, Any]], str, int, int], dict[str, Any]]
    """The response document around (content, stop reason, input tokens, output tokens)."""
    error: Callable[[str, str], tuple[dict[str, Any], dict[str, str]]]
    """The error body and headers for (the API's error code, the message)."""


class ToolChatServer(LoopbackServer):
    """A chat API whose replies are content lists; ``api`` says how it spells them."""

    api: ChatApi

    def tool_answer(
        self,
        tool_input: dict[str, Any],
        *,
        stop: str = "tool_use",
        input_tokens: int = 20,
        output_tokens: int = 8,
        delay: float = 0.0,
    ) -> None:
        """Queue a response calling the ``answer`` tool with ``tool_input``."""
        content = [self.api.tool_use(tool_input)]
        body = self.api.document(content, stop, input_tokens, output_tokens)
        self.replies.append(Reply(200, body, delay=delay))

    def text(
        self, text: str, *, stop: str = "end_turn", input_tokens: int = 20, output_tokens: int = 8
    ) -> None:
        """Queue a response with text only."""
        body = self.api.document([self.api.text_block(text)], stop, input_tokens, output_tokens)
        self.replies.append(Reply(200, body))

    def error(
        self, status: int, code: str, message: str, headers: dict[str, str] | None = None
    ) -> None:
        """Queue an error as the API sends it (``code``: ``rate_limit_error``,
        ``ThrottlingException``, ...)."""
        body, api_headers = self.api.error(code, message)
        self.replies.append(Reply(status, body, {**api_headers, **(headers or {})}))


def message(
    content: list[dict[str, Any]], stop: str, input_tokens: int, output_tokens: int
) -> dict[str, Any]:
    """A Messages API response document."""
    return {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": "claude-haiku-4-5-20251001",
        "content": content,
        "stop_reason": stop,
        "stop_sequence": None,
        "usage": {"input_tokens": input_tokens, "output_tokens": output_tokens},
    }


def converse(
    content: list[dict[str, Any]], stop: str, input_tokens: int, output_tokens: int
) -> dict[str, Any]:
    """A Converse response document."""
    return {
        "output": {"message": {"role": "assistant", "content": content}},
        "stopReason": stop,
        "usage": {
            "inputTokens": input_tokens,
            "outputTokens": output_tokens,
            "totalTokens": input_tokens + output_tokens,
        },
        "metrics": {"latencyMs": 5},
    }


ANTHROPIC = ChatApi(
    tool_use=lambda tool_input: {
        "type": "tool_use",
        "id": "toolu_1",
        "name": "answer",
        "input": tool_input,
    },
    text_block=lambda text: {"type": "text", "text": text},
    document=message,
    error=lambda kind, text: ({"type": "error", "error": {"type": kind, "message": text}}, {}),
)
# The AWS JSON protocol names the error in a header.
BEDROCK = ChatApi(
    tool_use=lambda tool_input: {
        "toolUse": {"toolUseId": "tu-1", "name": "answer", "input": tool_input}
    },
    text_block=lambda text: {"text": text},
    document=converse,
    error=lambda code, text: ({"message": text}, {"x-amzn-ErrorType": code}),
)


class FakeAnthropic(ToolChatServer):
    """``POST /v1/messages``; ``url`` is what ``anthropic_base_url`` takes."""

    api = ANTHROPIC


class FakeBedrock(ToolChatServer):
    """``POST /model/{modelId}/converse`` as bedrock-runtime answers it."""

    api = BEDROCK
