"""Several services of one env on one real sshd host ([[hosts.NAME.services]]): a push
restarts every one of them, in order (each healthy before the next; with stagger_s, started
that far apart), and when the second fails health the host rolls back and BOTH are
restarted on the old code; `status` shows each one's state. Two sandbox stub servers stand
for two GPUs' sglang servers: the host's own (gpu0, port 30000) and a copy beside it (gpu1,
port 30001)."""

from __future__ import annotations

import json
import shutil
import time
import tomllib
import urllib.request
from pathlib import Path

import pytest
import tomli_w

from tests.pipeline.test_push_watchdog import events_of
from tests.support import make_patchset, utils_file

pytestmark = pytest.mark.hosts

SECOND_PORT = 30001


@pytest.fixture
def second_stopped(deploy):
    """Stop the second stub server after the test (the sandbox stops only its own)."""
    yield
    host = deploy.host
    host.run(f"{host.python} {host.service_dir}2/sglang_stub.py stop")


def _two_services(deploy, stagger_s: float | None = None) -> tuple[Path, Path]:
    """Give host0 a second stub server (a copy of its service dir, its own port), started on
    the old code as an operator would, and make the inventory list both as services.

    Returns both service dirs as the controller sees them.
    """
    host = deploy.host
    first = host.service_dir_on_disk
    second = first.with_name("service2")
    second.mkdir()
    host.write_stub_config(imports="patched")  # topology, not sglang: ~5 s less per start
    shutil.copy2(first / "sglang_stub.py", second / "sglang_stub.py")
    config = {**host.read_stub_config(), "port": SECOND_PORT}
    (second / "stub.json").write_text(json.dumps(config) + "\n")
    script = f"{host.python} {host.service_dir}2/sglang_stub.py"
    assert host.run(f"{script} start").returncode == 0
    _wait_healthy(host.address, SECOND_PORT)

    inventory = deploy.sandbox.inventory_path
    data = tomllib.loads(inventory.read_text())
    shared = data["defaults"]["service"]
    own = data["hosts"]["host0"].pop("service", {})
    gpu0 = {"name": "gpu0", **{k: shared[k] for k in ("start", "stop", "status", "log_file")}}
    gpu0.update(own)
    gpu1 = {
        "name": "gpu1",
        "start": f"{script} start",
        "stop": f"{script} stop",
        "status": f"{script} status",
        "log_file": f"{host.service_dir}2/server.log",
        "health_url": f"http://{host.address}:{SECOND_PORT}/health_generate",
    }
    data["hosts"]["host0"]["services"] = [gpu0, gpu1]
    if stagger_s is not None:
        data["hosts"]["host0"]["stagger_s"] = stagger_s
    inventory.write_text(tomli_w.dumps(data))
    return first, second


def _wait_healthy(address: str, port: int, timeout_s: float = 60.0) -> None:
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            with urllib.request.urlopen(f"http://{address}:{port}/health_generate", timeout=5):
                return
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)


def _starts(service_dir: Path) -> int:
    """How many times this stub server started (its log's start lines)."""
    log = service_dir / "server.log"
    return log.read_text().count("stub server starting") if log.exists() else 0


def _service_marks(events: list[dict]) -> list[tuple[str, str]]:
    """(service, restarted|healthy) in the order the info events came."""
    return [
        (e["data"]["service"], "restarted" if "restart" in e["data"] else "healthy")
        for e in events
        if e["event"] == "info" and "service" in (e["data"] or {})
    ]


def test_staggered_services_start_that_far_apart(deploy, second_stopped):
    first, second = _two_services(deploy, stagger_s=1.5)
    starts = _starts(first), _starts(second)
    done = deploy.cli("push", "-H", "host0", "--json")
    assert done.returncode == 0, done.stderr[-3000:]
    assert _service_marks(events_of(done.stdout)) == [
        ("gpu0", "restarted"),
        ("gpu1", "restarted"),
        ("gpu0", "healthy"),
        ("gpu1", "healthy"),
    ]
    # server.pid is written when a stub starts: the second start came at least 1.5 s later
    apart_s = (second / "server.pid").stat().st_mtime - (first / "server.pid").stat().st_mtime
    assert apart_s >= 1.5, apart_s
    assert (_starts(first), _starts(second)) == (starts[0] + 1, starts[1] + 1)
    assert _status_of_services(deploy) == [
        ("gpu0", True, "HTTP 200"),
        ("gpu1", True, "HTTP 200"),
    ]
    host = deploy.host
    assert host.run(f"{host.python} {host.service_dir}2/sglang_stub.py stop").returncode == 0
    gpu1 = _status_of_services(deploy)[1]
    assert gpu1[:2] == ("gpu1", False) and gpu1[2].startswith("no answer: "), gpu1


def _status_of_services(deploy) -> list[tuple[str, bool | None, str]]:
    """`status`'s view of each service: name, running, what health answers."""
    done = deploy.cli("status", "-H", "host0", "--json")
    assert done.returncode == 0, done.stderr[-2000:]
    assert "services" in done.stderr  # the table's column
    events = [json.loads(x) for x in done.stdout.splitlines() if x.startswith("{")]
    services = [e["data"]["service"] for e in events if "service" in (e["data"] or {})]
    return [(s["name"], s["running"], s["health"]) for s in services]


def _breaks_the_second_server(root: Path) -> None:
    """The new code kills only the server that runs from service2 (gpu1) as it starts."""
    path = utils_file(root)
    path.write_text(path.read_text() + "\nimport sys as _sys\nif 'service2' in _sys.argv[0]:\n"
                    "    raise RuntimeError('deliberately broken on gpu1')\n")  # fmt: skip


def test_the_second_service_failing_health_rolls_back_both(deploy, tmp_path, second_stopped):
    first, second = _two_services(deploy)
    before, starts = deploy.host.tree_digest(), (_starts(first), _starts(second))
    patchsets = make_patchset(tmp_path / "p", mutate=_breaks_the_second_server)
    done = deploy.cli("push", "-H", "host0", "--json", patchsets=patchsets)
    assert done.returncode == 1, done.stderr[-3000:]
    events = events_of(done.stdout)
    failed = [e for e in events if e["stage"] == "health" and e["event"] == "fail"]
    assert len(failed) == 1 and failed[0]["message"].startswith("gpu1: "), failed
    assert "gpu1: " in done.stderr and "rolled back" in done.stderr  # the summary names it
    assert deploy.host.tree_digest() == before
    assert [e["state"] for e in deploy.journal()] == ["installing", "rolled_back"]
    # in order, each healthy before the next restarts; the rollback restarted both on the
    # old code, gpu0 (healthy on the new code) too
    marks = _service_marks(events)
    assert marks[:3] == [("gpu0", "restarted"), ("gpu0", "healthy"), ("gpu1", "restarted")]
    assert marks[3:] == [
        ("gpu0", "restarted"),
        ("gpu0", "healthy"),
        ("gpu1", "restarted"),
        ("gpu1", "healthy"),
    ]
    assert (_starts(first), _starts(second)) == (starts[0] + 2, starts[1] + 2)
    _wait_healthy(deploy.host.address, SECOND_PORT, timeout_s=1)
