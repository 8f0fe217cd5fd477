"""``http_download``, what ``attach`` steps download ``url`` files with, against a real HTTP
server on loopback: it follows a redirect, never reads past its bound (with or without a
``Content-Length``), and says which errors another attempt can fix."""

from __future__ import annotations

from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from threading import Thread

import pytest

from langorch.adapters.http import http_download
from langorch.domain.artifacts import ArtifactError, ArtifactTooLargeError

BODY = b"order,amount\nA-1,10\n"


class _Files(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        path = self.path.split("?")[0]
        if path == "/file.csv":
            self._answer(200, BODY, {"Content-Type": "text/csv"})
        elif path == "/moved":
            self._answer(302, b"", {"Location": "/file.csv"})
        elif path == "/big-declared":
            self._answer(200, b"x" * 100, {"Content-Length": "100"})
        elif path == "/big-chunked":
            self.send_response(200)
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            chunk = b"x" * 60
            for _ in range(2):
                self.wfile.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
            self.wfile.write(b"0\r\n\r\n")
        elif path == "/busy":
            self._answer(503, b"busy", {})
        else:
            self._answer(404, b"no", {})

    def _answer(self, status: int, body: bytes, headers: dict[str, str]) -> None:
        self.send_response(status)
        headers.setdefault("Content-Length", str(len(body)))
        for name, value in headers.items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        return


@pytest.fixture(scope="module")
def server() -> Iterator[str]:
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Files)
    Thread(target=httpd.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()
    httpd.server_close()


def test_a_file_comes_back_with_its_content_type(server: str) -> None:
    assert http_download(f"{server}/file.csv", max_bytes=1000, timeout=5) == (BODY, "text/csv")


def test_a_redirect_is_followed_to_the_file(server: str) -> None:
    assert http_download(f"{server}/moved", max_bytes=1000, timeout=5)[0] == BODY


@pytest.mark.parametrize("path", ["/big-declared", "/big-chunked"])
def test_a_file_over_the_bound_is_refused_whether_or_not_its_length_is_declared(
    server: str, path: str
) -> None:
    with pytest.raises(ArtifactTooLargeError, match="is over 99 bytes, the most a step may"):
        http_download(f"{server}{path}", max_bytes=99, timeout=5)


@pytest.mark.parametrize(("path", "retryable"), [("/nothing", False), ("/busy", True)])
def test_an_error_status_says_whether_another_attempt_could_succeed(
    server: str, path: str, retryable: bool
) -> None:
    with pytest.raises(ArtifactError, match=r"downloading http://127\.0\.0\.1:\d+/\w+: HTTP") as e:
        http_download(f"{server}{path}?token=s3cret", max_bytes=1000, timeout=5)
    assert e.value.retryable is retryable
    assert "s3cret" not in str(e.value)


def test_only_http_urls_are_downloaded() -> None:
    with pytest.raises(ArtifactError, match="http\\(s\\) URLs only"):
        http_download("file:///etc/passwd", max_bytes=1000, timeout=5)
