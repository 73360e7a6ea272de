"""health_probe.get_status against real sockets: a real HTTP server's codes (200, 503, a
redirect not followed), what it is asked (path, query, Host), and every way of not
answering (refused, hung up, not HTTP, silent past the timeout); and the health path of
the agent importing no urllib.request or http.client (what the probe is for)."""

from __future__ import annotations

import http.server
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from ddtree_deploy.agent.host.health_probe import get_status, status_of


@contextmanager
def http_server(code: int, seen: list[tuple[str, str]]) -> Iterator[int]:
    """A real HTTP server answering every GET with `code`; records (path, Host)."""

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 (the stdlib's name)
            seen.append((self.path, self.headers.get("Host", "")))
            self.send_response(code)
            if code == 301:
                self.send_header("Location", "/elsewhere")
            self.end_headers()

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server.server_address[1]
    finally:
        server.shutdown()
        server.server_close()


@contextmanager
def raw_server(answer: bytes | None) -> Iterator[int]:
    """A listening socket that reads the request, then sends `answer` and hangs up, or
    with None never answers (until the test ends)."""
    listener = socket.create_server(("127.0.0.1", 0))
    done = threading.Event()

    def serve() -> None:
        conn, _ = listener.accept()
        with conn:
            conn.recv(4096)
            if answer is None:
                done.wait(10)
            else:
                conn.sendall(answer)

    threading.Thread(target=serve, daemon=True).start()
    try:
        yield listener.getsockname()[1]
    finally:
        done.set()
        listener.close()


@pytest.mark.parametrize("code", [200, 503, 404, 301])
def test_the_status_is_the_servers_and_a_redirect_is_not_followed(code):
    seen: list[tuple[str, str]] = []
    with http_server(code, seen) as port:
        assert get_status(f"http://127.0.0.1:{port}/health_generate?x=1", 5) == code
    assert seen == [("/health_generate?x=1", f"127.0.0.1:{port}")]  # one GET, nothing followed


def test_an_empty_path_asks_for_the_root_and_user_info_stays_out_of_host():
    seen: list[tuple[str, str]] = []
    with http_server(200, seen) as port:
        assert get_status(f"http://user:pw@127.0.0.1:{port}", 5) == 200
    assert seen == [("/", f"127.0.0.1:{port}")]


def test_nothing_listening_is_a_refusal():
    with socket.create_server(("127.0.0.1", 0)) as taken:
        port = taken.getsockname()[1]
    with pytest.raises(ConnectionRefusedError, match="Connection refused"):
        get_status(f"http://127.0.0.1:{port}/health", 5)


def test_a_server_that_hangs_up_or_answers_no_http_is_named():
    with raw_server(b"") as port, pytest.raises(ConnectionResetError, match="without an answer"):
        get_status(f"http://127.0.0.1:{port}/", 5)
    with raw_server(b"SSH-2.0-OpenSSH_9.2\r\n") as port:
        with pytest.raises(ValueError, match="not an HTTP answer: b'SSH-2.0"):
            get_status(f"http://127.0.0.1:{port}/", 5)


def test_a_silent_server_times_out_after_the_timeout():
    with raw_server(None) as port, pytest.raises(TimeoutError, match="timed out"):
        get_status(f"http://127.0.0.1:{port}/", 0.3)


def test_https_goes_through_http_client_and_fails_on_a_plain_server():
    with http_server(200, []) as port, pytest.raises(OSError):
        get_status(f"https://127.0.0.1:{port}/", 5)  # no TLS there: the handshake fails


@pytest.mark.parametrize("url", ["ftp://127.0.0.1/x", "127.0.0.1:30000/health", "http://:80/"])
def test_a_url_that_is_not_http_is_a_value_error(url):
    with pytest.raises(ValueError, match="not an http"):
        get_status(url, 1)


@pytest.mark.parametrize(
    ("line", "code"),
    [(b"HTTP/1.1 200 OK\r\n", 200), (b"HTTP/1.0 503\r\n", 503), (b"HTTP/1.1 204", 204)],
)
def test_status_lines(line, code):
    assert status_of(line) == code


@pytest.mark.parametrize("line", [b"HTTP/1.1 20 OK\r\n", b"HTTP/1.1 2000\r\n", b"<html>\r\n"])
def test_lines_that_are_not_status_lines(line):
    with pytest.raises(ValueError, match="not an HTTP answer"):
        status_of(line)


def test_the_health_path_imports_no_http_library():
    """The restart and health ops' modules, and a probe, load no urllib.request or
    http.client (≈ 25 ms of CPU per agent on every push): negative control, the gate's
    HTTP module does."""
    script = (
        "import sys, ddtree_deploy.agent.host.ops_service as s, "
        "ddtree_deploy.agent.host.ops_service_state;"
        "from ddtree_deploy.agent.host.health_probe import get_status\n"
        "try: get_status('http://127.0.0.1:9/', 1)\n"
        "except OSError: pass\n"
        "print(sorted({'urllib.request', 'http.client'} & set(sys.modules)))\n"
        "import ddtree_deploy.agent.host.gate_http as g; g.build_opener(None)\n"
        "print(sorted({'urllib.request', 'http.client'} & set(sys.modules)))\n"
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == ["[]", "['http.client', 'urllib.request']"]
