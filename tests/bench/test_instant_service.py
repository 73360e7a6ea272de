"""bench/instant_service.py, the benchmarks' stand-in server: start answers health before it
returns, stop ends it, status tells the two apart, a "broken" marker makes health 503; and
stop/status import nothing beyond what they use (their cost is the stand-in's, not a tool's)."""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path

import pytest

SERVICE = Path(__file__).resolve().parents[2] / "bench" / "instant_service.py"


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.fixture
def service(tmp_path):
    """A copy of the service in tmp_path with its instant.json; stopped afterwards."""
    shutil.copyfile(SERVICE, tmp_path / "instant_service.py")
    port = free_port()
    (tmp_path / "instant.json").write_text(json.dumps({"host": "127.0.0.1", "port": port}))

    def run(action: str) -> int:
        argv = [sys.executable, str(tmp_path / "instant_service.py"), action]
        return subprocess.run(argv, capture_output=True, timeout=30).returncode

    run.dir, run.url = tmp_path, f"http://127.0.0.1:{port}/health_generate"
    yield run
    run("stop")


def health(url: str) -> int:
    try:
        with urllib.request.urlopen(url, timeout=5) as answer:
            return answer.status
    except urllib.error.HTTPError as exc:
        return exc.code


def test_start_answers_health_at_once_and_stop_ends_it(service):
    assert service("status") == 3
    assert service("start") == 0
    assert service("status") == 0
    assert health(service.url) == 200  # the first poll, no retry
    assert service("stop") == 0
    assert service("status") == 3
    with pytest.raises(urllib.error.URLError):
        health(service.url)


def test_a_marker_in_the_watched_file_makes_health_503(service):
    marker_file = service.dir / "patched.py"
    marker_file.write_text("# BROKEN-BY-BENCH\n")
    config = json.loads((service.dir / "instant.json").read_text())
    config |= {"marker_file": str(marker_file), "marker": "BROKEN-BY-BENCH"}
    (service.dir / "instant.json").write_text(json.dumps(config))
    assert service("start") == 0
    assert health(service.url) == 503


def test_stop_and_status_do_not_import_the_http_stack():
    probe = (
        "import runpy, sys; sys.argv = ['x', 'status']\n"
        f"try: runpy.run_path({str(SERVICE)!r}, run_name='__main__')\n"
        "except SystemExit: pass\n"
        "print(sorted(m for m in ('http.server', 'http.client', 'socket', 'json')"
        " if m in sys.modules))"
    )
    done = subprocess.run([sys.executable, "-S", "-c", probe], capture_output=True, text=True)
    assert done.stdout.strip() == "[]", done.stderr
