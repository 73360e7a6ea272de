"""smoke/server.py against an in-process fake server: each gap fails with its URL and values.

The real stub behind real sshd hosts is covered in test_smoke_hosts.py; this file pins the
suite's decisions (fallback route, derived accept length, never gating on accept rate).
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

SERVER_SUITE = Path(__file__).resolve().parents[2] / "smoke" / "server.py"
GOOD_INFO = {"speculative_algorithm": "DDTREE", "speculative_ddtree_budget": 64}
GOOD_META = {"completion_tokens": 16, "spec_verify_ct": 5, "spec_accept_length": 3.2}


class FakeServer:
    """Answers GET/POST by path from `routes` ({path: (status, body)}); 404 otherwise."""

    def __init__(self) -> None:
        self.routes: dict[str, tuple[int, Any]] = {}
        self.posted: list[dict] = []
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 (http.server's naming)
                self.answer(*fake.routes.get(self.path, (404, {"error": "no route"})))

            def do_POST(self) -> None:  # noqa: N802
                length = int(self.headers.get("Content-Length") or 0)
                fake.posted.append(json.loads(self.rfile.read(length) or b"{}"))
                self.do_GET()

            def answer(self, status: int, body: Any) -> None:
                payload = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            def log_message(self, *args: object) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"

    def healthy(self, info: dict | None = None, meta: dict | None = None) -> FakeServer:
        self.routes = {
            "/health_generate": (200, {}),
            "/server_info": (200, {**GOOD_INFO, **(info or {})}),
            "/generate": (200, {"text": " Paris.", "meta_info": {**GOOD_META, **(meta or {})}}),
        }
        return self


@pytest.fixture
def fake() -> Iterator[FakeServer]:
    server = FakeServer()
    thread = threading.Thread(target=server.httpd.serve_forever, daemon=True)
    thread.start()
    yield server
    server.httpd.shutdown()
    server.httpd.server_close()


def run_suite(url: str, service: str = "command", **spec: Any) -> tuple[int, dict]:
    """Run smoke/server.py like the agent does; return (exit code, its result line)."""
    request = {
        "options": {
            "server": {"server_url": url, "expected_algorithm": "DDTREE", "timeout_s": 5, **spec},
            "service": service,
        }
    }
    done = subprocess.run(
        [sys.executable, str(SERVER_SUITE)],
        input=json.dumps(request),
        capture_output=True,
        text=True,
        timeout=60,
    )
    return done.returncode, json.loads(done.stdout.splitlines()[-1])


def checks_of(result: dict) -> dict[str, dict]:
    return {c["name"]: c for c in result["checks"]}


def test_healthy_ddtree_server_passes(fake):
    code, result = run_suite(fake.healthy().url, expected_ddtree_budget=64, max_new_tokens=8)
    assert code == 0 and result["passed"] and not result["skipped"], result
    assert set(checks_of(result)) == {"health", "server_info", "generate", "acceptance"}
    sampling = fake.posted[0]["sampling_params"]
    assert sampling == {"temperature": 0, "max_new_tokens": 8}


@pytest.mark.parametrize(
    ("spec", "info", "meta", "check", "words"),
    [
        ({}, {"speculative_algorithm": "EAGLE"}, {}, "server_info", ["'DDTREE'", "'EAGLE'"]),
        ({"expected_ddtree_budget": 32}, {}, {}, "server_info", ["budget expected 32", "got 64"]),
        ({"min_accept_length": 2.0}, {}, {"spec_accept_length": 1.4}, "acceptance", ["1.400"]),
        ({}, {}, {"spec_verify_ct": 0}, "acceptance", ["spec_verify_ct expected > 0, got 0"]),
    ],
)
def test_each_gap_fails_saying_what_and_where(fake, spec, info, meta, check, words):
    code, result = run_suite(fake.healthy(info, meta).url, **spec)
    failed = [c for c in result["checks"] if not c["passed"]]
    assert code == 1 and not result["passed"]
    assert [c["name"] for c in failed] == [check]
    assert fake.url in failed[0]["detail"]
    for word in words:
        assert word in failed[0]["detail"]


def test_accept_rate_is_never_gated_and_length_can_be_derived(fake):
    fake.healthy(meta={"spec_accept_rate": 0.01})
    fake.routes["/get_server_info"] = fake.routes.pop("/server_info")  # an older sglang
    meta = {"completion_tokens": 12, "spec_verify_ct": 4}  # no spec_accept_length
    fake.routes["/generate"] = (200, {"text": "x", "meta_info": meta})
    code, result = run_suite(fake.url, min_accept_length=3.0)
    assert code == 0 and result["passed"], result
    assert "/get_server_info" in checks_of(result)["server_info"]["detail"]
    assert "completion_tokens/spec_verify_ct 3.000" in checks_of(result)["acceptance"]["detail"]


def test_unhealthy_server_stops_after_health(fake):
    fake.healthy()
    fake.routes["/health_generate"] = (503, {"ready": False})
    code, result = run_suite(fake.url)
    assert code == 1 and list(checks_of(result)) == ["health"]
    assert f"GET {fake.url}/health_generate: expected HTTP 200, got 503" in result["details"]


def test_no_speculation_expected_skips_the_acceptance_check(fake):
    fake.healthy(info={"speculative_algorithm": None}, meta={"spec_verify_ct": 0})
    code, result = run_suite(fake.url, expected_algorithm=None)
    assert code == 0 and "acceptance" not in checks_of(result), result


def test_host_without_service_is_skipped_never_passed():
    code, result = run_suite("http://127.0.0.1:9", service="none")
    assert code == 0 and result["skipped"] and not result["passed"]
