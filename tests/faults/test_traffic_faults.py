"""Faults at the drain and readmit stages (a service behind the sandbox's router fixture),
with the fault matrix's invariant: the sglang tree ends all-old or all-new, the service
runs, the journal is finished, the lock released, and the exit code says which.

- the router is down when the push drains: nothing restarted, files restored, exit 1;
- the router refuses to add the server back after every gate passed: the deploy stands
  (committed, all-new), exit 3 naming the router, the server out of the pool as the
  operator must know.
"""

from __future__ import annotations

import tomllib

import pytest

from ddtree_sandbox.inventory_file import render_toml
from ddtree_sandbox.router import Router, serve_router
from tests.faults.hostside import HOST_PYTHON, SERVICE
from tests.faults.runner import expected_after
from tests.support import make_patchset, run_cli

pytestmark = pytest.mark.hosts

ROUTER_PORT = 30901


def _behind(fh, router_url: str) -> None:
    fh.host.write_stub_config(imports="patched")  # ~5 s less per start
    data = tomllib.loads(fh.sandbox.inventory_path.read_text())
    worker = f"http://{fh.host.address}:30000"
    drain = {"router": router_url, "worker_url": worker, "grace_s": 0}
    data["hosts"]["host0"].setdefault("service", {})["drain"] = drain
    fh.sandbox.inventory_path.write_text(render_toml(data))


def _push(fh, patchsets):
    inv = str(fh.sandbox.inventory_path)
    return run_cli("push", "-H", "host0", "-i", inv, "--patchsets-dir", str(patchsets))


def _running(fh) -> bool:
    return fh.host.run([HOST_PYTHON, f"{SERVICE}/sglang_stub.py", "status"]).returncode == 0


def test_a_router_down_at_drain_restarts_nothing(fault_host, tmp_path):
    fh = fault_host
    _behind(fh, f"http://{fh.host.address}:{ROUTER_PORT}")  # nothing listens there
    fh.start_service()
    log = fh.host.service_dir_on_disk / "server.log"
    starts = log.read_text().count("stub server starting")
    before = fh.digest()
    done = _push(fh, make_patchset(tmp_path / "ps"))
    assert done.returncode == 1, done.stderr[-3000:]
    said = " ".join(done.stderr.split())
    assert "drain failed: service: the router" in said and "did not remove" in said, said
    assert fh.digest() == before
    assert log.read_text().count("stub server starting") == starts  # never restarted
    assert [j["state"] for j in fh.journal()] == ["installing", "rolled_back"]
    assert fh.lock() is None and _running(fh)


def test_a_router_refusing_the_readmit_leaves_the_deploy_and_says_so(fault_host, tmp_path):
    fh = fault_host
    worker = f"http://{fh.host.address}:30000"
    router = Router([worker], refuse=("add_worker",))
    server = serve_router(router, fh.host.address, ROUTER_PORT)
    try:
        _behind(fh, f"http://{fh.host.address}:{ROUTER_PORT}")
        fh.start_service()
        patchsets = make_patchset(tmp_path / "ps")
        expected = expected_after(fh.digest(), patchsets)
        done = _push(fh, patchsets)
    finally:
        server.shutdown()
    assert done.returncode == 3, done.stderr[-3000:]
    said = " ".join(done.stderr.split())
    assert "deployed, but service: the router" in said and "did not add it back" in said
    assert router.workers == []  # removed, not re-added: the operator must act
    assert fh.digest() == expected
    assert [j["state"] for j in fh.journal()] == ["installing", "committed"]
    assert fh.lock() is None and _running(fh)
