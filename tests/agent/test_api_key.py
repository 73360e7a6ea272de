"""The server's API key on the agent's side: read on the host from a file or a variable,
sent as `Authorization: Bearer` to every path but /health* and /metrics (what sglang's
middleware checks), through no proxy, and redacted from everything sent back (the gate's
measurement, the service log). Against a keyed HTTP server on loopback, in process."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from ddtree_deploy.agent.host import gate_http, ops_gate, ops_service, wire
from ddtree_deploy.agent.host.api_key import read_api_key
from ddtree_deploy.agent.host.state import Ctx

KEY = "sk-agent-test-93b1"


class Keyed:
    """A server that wants `Bearer KEY` on protected paths, and echoes it in errors."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, str | None]] = []  # (path, Authorization header)
        keyed = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:
                pass

            def reply(self, status: int, body: object) -> None:
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self) -> None:
                auth = self.headers.get("Authorization")
                keyed.seen.append((self.path, auth))
                open_path = self.path.startswith(("/health", "/metrics"))
                if not open_path and auth != f"Bearer {KEY}":
                    return self.reply(401, {"error": "Unauthorized"})
                self.reply(200, {"speculative_algorithm": "DDTREE", "api_key": KEY})

            def do_POST(self) -> None:
                self.rfile.read(int(self.headers["Content-Length"]))
                keyed.seen.append((self.path, self.headers.get("Authorization")))
                if self.headers.get("Authorization") != f"Bearer {KEY}":
                    return self.reply(401, {"error": "Unauthorized"})
                self.reply(500, {"error": f"server args api_key={KEY}: out of memory"})

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"


@pytest.fixture
def keyed(monkeypatch) -> Iterator[Keyed]:
    for name in ("http_proxy", "HTTP_PROXY"):  # a dead proxy: a request sent there fails
        monkeypatch.setenv(name, "http://127.0.0.1:9")
    for name in ("no_proxy", "NO_PROXY"):
        monkeypatch.delenv(name, raising=False)
    server = Keyed()
    thread = threading.Thread(target=server.httpd.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    yield server
    server.httpd.shutdown()
    server.httpd.server_close()


def key_file(tmp_path: Path) -> Path:
    path = tmp_path / "api_key"
    path.write_text(f"{KEY}\nsecond line ignored\n")
    return path


def test_the_key_goes_only_to_protected_paths_and_no_proxy_is_used(keyed):
    opener = gate_http.build_opener(KEY)
    for path in ("/health_generate", "/health", "/metrics", "/server_info"):
        assert gate_http.call(opener, keyed.url + path, 5)[0] == 200
    assert dict(keyed.seen) == {
        "/health_generate": None,
        "/health": None,
        "/metrics": None,
        "/server_info": f"Bearer {KEY}",
    }


def test_without_the_key_a_401_says_what_to_set(keyed):
    text, error = gate_http.get_text(gate_http.build_opener(), keyed.url + "/server_info", 5, 100)
    assert text is None
    assert error.endswith(
        "HTTP 401: the server requires an API key (set smoke.api_key_file or "
        "smoke.api_key_env in the inventory), or refused the one given"
    )


def test_the_gate_reads_the_key_on_the_host_and_never_sends_it_back(tmp_path, keyed):
    args = {"server_url": keyed.url, "prompts": [{"text": "hi"}], "rounds": 1,
            "warmup_requests": 0, "api_key_file": str(key_file(tmp_path))}  # fmt: skip
    ctx = Ctx({"state_dir": str(tmp_path / "state")})
    got = ops_gate.op_gate_measure(ctx, wire.parse_args("gate_measure", args))
    assert ("/generate", f"Bearer {KEY}") in keyed.seen
    assert got.algorithm == "DDTREE" and got.replay.errors == 1
    assert "api_key=[redacted]: out of memory" in got.replay.first_error
    assert KEY not in json.dumps(got.to_dict())


def test_an_unreadable_key_fails_naming_the_file_before_any_request(tmp_path, keyed):
    missing = tmp_path / "nope"
    args = {"server_url": keyed.url, "prompts": [{"text": "hi"}], "api_key_file": str(missing)}
    ctx = Ctx({"state_dir": str(tmp_path / "state")})
    with pytest.raises(wire.OpFailed) as caught:
        ops_gate.op_gate_measure(ctx, wire.parse_args("gate_measure", args))
    assert caught.value.code == wire.Code.API_KEY_UNREADABLE
    assert (
        str(caught.value) == f"smoke.api_key_file {missing}: cannot read: No such file or directory"
    )
    assert keyed.seen == []


@pytest.mark.parametrize(
    ("content", "env", "error"),
    [
        (f"{KEY}\n", None, None),
        ("\n\n", None, "the first line is empty"),
        (None, {"K": KEY}, None),
        (None, {}, "smoke.api_key_env K: not set (or empty) in the agent's environment"),
    ],
)
def test_read_api_key(tmp_path, monkeypatch, content, env, error):
    monkeypatch.delenv("K", raising=False)
    for name, value in (env or {}).items():
        monkeypatch.setenv(name, value)
    path = tmp_path / "k"
    if content is not None:
        path.write_text(content)
    key, problem = read_api_key(
        str(path) if content is not None else None, None if content else "K"
    )
    assert (key, problem is None) == (None if error else KEY, error is None)
    if error:
        assert error in problem and KEY not in problem


def test_the_service_log_sent_back_has_the_key_redacted(tmp_path):
    log = tmp_path / "server.log"
    log.write_text(f"server_args=ServerArgs(model_path='m', api_key='{KEY}')\nready\n")
    service = wire.Service(kind="command", start=["true"], stop=["true"], log_file=str(log),
                           api_key_file=str(key_file(tmp_path)))  # fmt: skip
    text = ops_service._service_log(service)
    assert "api_key='[redacted]'" in text and KEY not in text
