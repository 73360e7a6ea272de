"""Drain and re-admit through a push over two real sshd hosts behind a router: a steady
client loop through the sandbox's router (sandbox/ddtree_sandbox/router.py, shaped like the
SGLang router's worker API) sees no failed request while `--batch 1` restarts one host
after the other, and the router's log puts remove < restart < health < add on each host
(health: the fast patchset's last gate; verify and canary come before the add too);
a patch that crashes the server is re-added only after the rollback's health check; a
failing pre_restart hook stops the push before any server restarts (files restored, exit
1). The hooks run on the controller with DDTREE_HOST, DDTREE_DEPLOY_ID and DDTREE_STAGE."""

from __future__ import annotations

import datetime
import json
import shlex
import sys
import threading
import time
import tomllib
import urllib.request

import pytest

from ddtree_sandbox.inventory_file import render_toml
from ddtree_sandbox.router import Router, serve_router
from tests.fleet.conftest import parse_events
from tests.support import make_patchset, utils_file

pytestmark = pytest.mark.hosts

ROUTER_PORT = 30900


class ClientLoop:
    """Requests through the router, one after another, until stopped; counts failures."""

    def __init__(self, url: str) -> None:
        self.url, self.sent, self.failed = url, 0, []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
        body = json.dumps({"text": "hi", "sampling_params": {"max_new_tokens": 4}}).encode()
        while not self._stop.is_set():
            self.sent += 1
            try:
                with opener.open(urllib.request.Request(self.url, data=body), timeout=30):
                    pass
            except OSError as exc:
                self.failed.append(str(exc))

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=60)


@pytest.fixture
def behind_router(fleet_factory, tmp_path):
    """Two hosts whose stub servers (metrics on, 50 ms per request) sit behind a router;
    hooks that append their environment to a file. Yields (fleet, router, workers, file)."""
    fleet = fleet_factory(2)
    hooks_file = tmp_path / "hooks.jsonl"
    record = (f"import json, os; open({str(hooks_file)!r}, 'a').write(json.dumps("
              "{k: os.environ[k] for k in ('DDTREE_HOST', 'DDTREE_DEPLOY_ID', "
              "'DDTREE_STAGE')}) + '\\n')")  # fmt: skip
    hook = f"{sys.executable} -c {shlex.quote(record)}"
    workers = {}
    for host in fleet.hosts:
        host.write_stub_config(metrics=True, generate_delay_s=0.05, imports="patched")
        done = host.run(f"{host.python} {host.service_dir}/sglang_stub.py start")
        assert done.returncode == 0, done.stderr
        workers[host.name] = f"http://{host.address}:30000"
    for url in workers.values():
        _wait_healthy(url)
    address = fleet.hosts[0].address
    router = Router(list(workers.values()))
    server = serve_router(router, address, ROUTER_PORT)
    data = tomllib.loads(fleet.sandbox.inventory_path.read_text())
    data["defaults"]["hooks"] = {"pre_restart": hook, "post_verify": hook, "on_rollback": hook}
    for name, url in workers.items():
        drain = {"router": f"http://{address}:{ROUTER_PORT}", "worker_url": url}
        data["hosts"][name].setdefault("service", {})["drain"] = drain
    fleet.sandbox.inventory_path.write_text(render_toml(data))
    try:
        yield fleet, router, workers, hooks_file
    finally:
        server.shutdown()


def _wait_healthy(url: str, timeout_s: float = 60.0) -> None:
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            with urllib.request.urlopen(f"{url}/health_generate", timeout=5):
                return
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)


def _ts(event) -> float:
    return datetime.datetime.fromisoformat(event.ts).timestamp()


def _first(events, host: str, stage: str, kind: str) -> float:
    return min(_ts(e) for e in events if e.host == host and e.stage == stage and e.event == kind)


def _hooks(path) -> list[tuple[str, str]]:
    lines = path.read_text().splitlines() if path.exists() else []
    return [(d["DDTREE_HOST"], d["DDTREE_STAGE"]) for d in map(json.loads, lines)]


def test_batch_one_push_behind_a_router_fails_no_client_request(behind_router):
    fleet, router, workers, hooks_file = behind_router
    client = ClientLoop(f"http://{fleet.hosts[0].address}:{ROUTER_PORT}/generate")
    try:
        done = fleet.cli("push", "--all", "--batch", "1", "--json")
    finally:
        client.stop()
    assert done.returncode == 0, done.stderr[-3000:]
    assert router.log.of("error") == []
    assert client.failed == [] and client.sent > 20, (client.sent, client.failed[:3])
    events = parse_events(done.stdout)
    for name, url in workers.items():
        removed = [t for t, worker in router.log.of("remove") if worker == url]
        added = [t for t, worker in router.log.of("add") if worker == url]
        assert len(removed) == len(added) == 1, router.log.entries
        restart = _first(events, name, "restart", "start")
        healthy = _first(events, name, "health", "ok")  # the last gate of this patchset
        assert removed[0] < restart < healthy < added[0], (removed, restart, healthy, added)
    assert sorted(router.workers) == sorted(workers.values())  # both back
    assert _hooks(hooks_file) == [
        ("host0", "pre_restart"),
        ("host0", "post_verify"),
        ("host1", "pre_restart"),
        ("host1", "post_verify"),
    ]
    ids = {json.loads(line)["DDTREE_DEPLOY_ID"] for line in hooks_file.read_text().splitlines()}
    assert len(ids) == 2 and all(i.endswith(tuple("0123456789abcdef")) for i in ids)


def _crash_at_start(root) -> None:
    path = utils_file(root)
    path.write_text(path.read_text() + "\nraise RuntimeError('deliberately crashed at start')\n")


def test_a_bad_patch_is_readmitted_only_after_the_rollback(behind_router, tmp_path):
    fleet, router, workers, hooks_file = behind_router
    fleet.patchsets = make_patchset(tmp_path / "bad", mutate=_crash_at_start)
    client = ClientLoop(f"http://{fleet.hosts[0].address}:{ROUTER_PORT}/generate")
    try:
        done = fleet.cli("push", "-H", "host0", "--json")
    finally:
        client.stop()
    assert done.returncode == 1, done.stderr[-3000:]
    assert client.failed == [], client.failed[:3]
    events = parse_events(done.stdout)
    url = workers["host0"]
    (removed,) = [t for t, worker in router.log.of("remove") if worker == url]
    (added,) = [t for t, worker in router.log.of("add") if worker == url]
    health_failed = _first(events, "host0", "health", "fail")
    back = [e for e in events if e.stage == "rollback" and "added back" in e.message]
    assert removed < health_failed < added and back, (removed, health_failed, added)
    assert _hooks(hooks_file) == [("host0", "pre_restart"), ("host0", "on_rollback")]


def test_a_failing_pre_restart_hook_restarts_nothing(behind_router):
    fleet, router, workers, hooks_file = behind_router
    host = fleet.hosts[0]
    data = tomllib.loads(fleet.sandbox.inventory_path.read_text())
    data["defaults"]["hooks"]["pre_restart"] = "false"
    fleet.sandbox.inventory_path.write_text(render_toml(data))
    log = host.service_dir_on_disk / "server.log"
    starts = log.read_text().count("stub server starting")
    before = host.tree_digest()
    done = fleet.cli("push", "-H", "host0", "--json")
    assert done.returncode == 1, done.stderr[-3000:]
    assert "drain failed: hook pre_restart (false) exited 1" in done.stderr
    assert host.tree_digest() == before
    assert log.read_text().count("stub server starting") == starts  # never restarted
    assert router.log.of("remove") == []
    assert _hooks(hooks_file) == [("host0", "on_rollback")]
