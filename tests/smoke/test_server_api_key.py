"""smoke/server.py against a keyed fake sglang on loopback, with http_proxy pointing at a
dead port: the key is read on the host (file or variable), sent where sglang checks it, and
never printed, even when the server echoes it; without it a 401 says what to set."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from tests.support import SMOKE_DIR

KEY = "sk-suite-test-4d20"
META = {"completion_tokens": 16, "spec_verify_ct": 5, "spec_accept_length": 3.2}


class KeyedSglang:
    """/health_generate open; /server_info and /generate want `Bearer KEY`; /server_info
    echoes the key (as sglang's does); `echo` makes /health_generate fail quoting it."""

    def __init__(self) -> None:
        self.echo = False
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:
                pass

            def reply(self, status: int, body: Any) -> None:
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def allowed(self) -> bool:
                return self.path.startswith("/health") or (
                    self.headers.get("Authorization") == f"Bearer {KEY}"
                )

            def do_GET(self) -> None:
                if not self.allowed():
                    return self.reply(401, {"error": "Unauthorized"})
                if self.path == "/health_generate" and server.echo:
                    return self.reply(503, {"error": f"starting with api_key={KEY}"})
                if self.path == "/server_info":
                    return self.reply(200, {"speculative_algorithm": "DDTREE", "api_key": KEY})
                self.reply(200, {})

            def do_POST(self) -> None:
                self.rfile.read(int(self.headers.get("Content-Length") or 0))
                if not self.allowed():
                    return self.reply(401, {"error": "Unauthorized"})
                self.reply(200, {"text": " Paris.", "meta_info": META})

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"


@pytest.fixture
def keyed() -> Iterator[KeyedSglang]:
    server = KeyedSglang()
    thread = threading.Thread(target=server.httpd.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    yield server
    server.httpd.shutdown()
    server.httpd.server_close()


def run_suite(url: str, env: dict[str, str] | None = None, **spec: Any) -> tuple[int, str]:
    """Run the suite as the agent does, behind a dead proxy; return (exit code, stdout)."""
    request = {"options": {"server": {"server_url": url, "expected_algorithm": "DDTREE",
                                      "timeout_s": 5, **spec}, "service": "command"}}  # fmt: skip
    proxy = "http://127.0.0.1:9"
    base = {k: v for k, v in os.environ.items() if k.lower() != "no_proxy"}
    done = subprocess.run(
        [sys.executable, str(SMOKE_DIR / "server.py")],
        input=json.dumps(request),
        capture_output=True,
        text=True,
        timeout=60,
        env={**base, "http_proxy": proxy, "HTTP_PROXY": proxy, **(env or {})},
    )
    return done.returncode, done.stdout + done.stderr


def key_file(tmp_path: Path) -> str:
    path = tmp_path / "key"
    path.write_text(KEY + "\n")
    return str(path)


def test_with_the_key_file_the_suite_passes_and_prints_no_key(tmp_path, keyed):
    code, out = run_suite(keyed.url, api_key_file=key_file(tmp_path))
    assert code == 0, out
    assert KEY not in out


def test_with_the_key_variable_the_suite_passes(keyed):
    code, out = run_suite(keyed.url, env={"SGLANG_KEY": KEY}, api_key_env="SGLANG_KEY")
    assert code == 0, out


def test_without_the_key_the_401_says_what_to_set(keyed):
    code, out = run_suite(keyed.url)
    assert code == 1
    result = json.loads(out.splitlines()[0])
    checks = {c["name"]: c for c in result["checks"]}
    assert checks["health"]["passed"]  # /health* is open
    assert (
        f'GET {keyed.url}/server_info: expected HTTP 200 with JSON, got HTTP 401 {{"error": '
        '"Unauthorized"}: the server requires an API key (set smoke.api_key_file or '
        "smoke.api_key_env in the inventory)"
    ) == checks["server_info"]["detail"]


def test_a_wrong_key_is_named_by_where_it_came_from(tmp_path, keyed):
    path = tmp_path / "wrong"
    path.write_text("sk-wrong\n")
    code, out = run_suite(keyed.url, api_key_file=str(path))
    assert code == 1 and f"the server refused the API key from smoke.api_key_file {path}" in out
    assert "sk-wrong" not in out


def test_an_echoed_key_is_redacted_from_the_result(tmp_path, keyed):
    keyed.echo = True
    code, out = run_suite(keyed.url, api_key_file=key_file(tmp_path))
    assert code == 1 and "api_key=[redacted]" in out
    assert KEY not in out


def test_a_missing_key_file_fails_naming_the_file(tmp_path, keyed):
    missing = tmp_path / "absent"
    code, out = run_suite(keyed.url, api_key_file=str(missing))
    assert code == 1
    assert f"smoke.api_key_file {missing}: cannot read: No such file or directory" in out
