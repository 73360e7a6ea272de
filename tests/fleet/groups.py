"""A restart group on real sshd hosts: the sandbox stubs of a fleet formed into one
multi-node server (sglang_stub.py `group` mode: the workers register the sha256 of their
installed ddtree_utils.py with the leader, whose health stays 503 until every rank
registered its own hash; a worker exits when the leader is gone), and what tests read back.
"""

from __future__ import annotations

import time
import tomllib
import urllib.error
import urllib.request

from ddtree_sandbox.inventory_file import render_toml

STUB = "/srv/service/sglang_stub.py"


def form_group(fleet) -> str:
    """Make the fleet's hosts one group (host0 the leader), started and healthy, and
    [groups.g] in the inventory; return the leader's URL."""
    leader = f"http://{fleet.hosts[0].address}:30000"
    for rank, host in enumerate(fleet.hosts):
        role = "leader" if rank == 0 else "worker"
        config = {"role": role, "rank": rank, "nnodes": len(fleet.hosts), "leader": leader}
        host.write_stub_config(group=config, imports="patched")  # ~5 s less per start
        assert host.run(f"{host.python} {STUB} start").returncode == 0
    wait_leader(leader)
    data = tomllib.loads(fleet.sandbox.inventory_path.read_text())
    members = [host.name for host in fleet.hosts]
    data["groups"] = {"g": {"members": members, "leader": "host0"}}
    fleet.sandbox.inventory_path.write_text(render_toml(data))
    return leader


def wait_leader(url: str, timeout_s: float = 90.0) -> None:
    """Until the leader answers health 200 (every rank registered the leader's hash)."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            with urllib.request.urlopen(f"{url}/health_generate", timeout=5):
                return
        except (urllib.error.URLError, OSError):
            assert time.monotonic() < deadline, f"{url} never healthy"
            time.sleep(0.2)


def starts(host) -> int:
    """How many times the host's stub server has started (its log's start lines)."""
    log = host.service_dir_on_disk / "server.log"
    return log.read_text().count("stub server starting") if log.exists() else 0


def running(host) -> bool:
    """The host's stub server answers its status command."""
    return host.run(f"{host.python} {STUB} status").returncode == 0
