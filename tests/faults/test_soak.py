"""Soak: 30 push/rollback cycles on 4 real sshd hosts in one controller process, checking
for leaks after every cycle (`make soak`)."""

from __future__ import annotations

import os
import threading
import time

import pytest
from typer.testing import CliRunner

from ddtree_deploy.cli import app
from ddtree_sandbox.processes import find_children, read_cmdline
from tests.faults.hostside import _mount_ns
from tests.support import make_patchset

pytestmark = [pytest.mark.hosts, pytest.mark.slow]
CYCLES = int(os.environ.get("DDTREE_SOAK_CYCLES", "30"))
KEEP = 3


def _open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def _host_processes(host) -> dict[str, int]:
    """What runs in the host: sshd sessions, agents, stub servers (by mount namespace)."""
    ns = _mount_ns(host.sshd_pid())
    counts = {"sessions": 0, "agents": 0, "servers": 0}
    counts["sessions"] = sum(
        read_cmdline(p).startswith("sshd:") for p in find_children(host.sshd_pid())
    )
    for entry in os.listdir("/proc"):
        if entry.isdigit() and _mount_ns(int(entry)) == ns:
            cmd = read_cmdline(int(entry))
            counts["agents"] += "ddtree-agent" in cmd
            counts["servers"] += "sglang_stub.py serve" in cmd
    return counts


def _controller_usage(baseline, timeout_s: float = 10.0) -> tuple[int, int]:
    """(open fds, threads) of this process, once closed transports' threads have ended."""
    deadline = time.monotonic() + timeout_s
    while True:
        usage = (_open_fds(), threading.active_count())
        if baseline is None or usage[1] <= baseline[1] or time.monotonic() > deadline:
            return usage
        time.sleep(0.1)


def _settled(host, timeout_s: float = 10.0) -> dict[str, int]:
    """Process counts once closed sessions have had a moment to exit."""
    deadline = time.monotonic() + timeout_s
    while True:
        counts = _host_processes(host)
        if counts["sessions"] == counts["agents"] == 0 or time.monotonic() > deadline:
            return counts
        time.sleep(0.1)


def test_30_push_rollback_cycles_on_4_hosts_leak_nothing(sandbox_factory, tmp_path):
    sandbox = sandbox_factory(4)
    inv = str(sandbox.inventory_path)
    patchsets = str(make_patchset(tmp_path, suites=["integrity"]))
    runner = CliRunner()
    befores = {h.name: h.tree_digest() for h in sandbox.hosts}
    baseline: tuple[int, int] | None = None
    for cycle in range(CYCLES):
        pushed = runner.invoke(app, ["push", "--all", "-i", inv, "--patchsets-dir", patchsets,
                                     "--keep-backups", str(KEEP), "--yes"])  # fmt: skip
        assert pushed.exit_code == 0, (cycle, pushed.output)
        back = runner.invoke(app, ["rollback", "--all", "-i", inv, "--yes"])
        assert back.exit_code == 0, (cycle, back.output)
        usage = _controller_usage(baseline)
        baseline = baseline or usage
        names = [t.name for t in threading.enumerate()]
        assert usage[0] <= baseline[0] + 2 and usage[1] <= baseline[1], (cycle, usage, names)
        for host in sandbox.hosts:
            assert _settled(host) == {"sessions": 0, "agents": 0, "servers": 1}, cycle
            backups = list((host.state_dir_on_disk / "backups").iterdir())
            assert len(backups) <= KEEP, (cycle, host.name, len(backups))
            assert not (host.state_dir_on_disk / "lock").exists()
    for host in sandbox.hosts:
        assert host.tree_digest() == befores[host.name]
        states = [line for line in (host.state_dir_on_disk / "journal.jsonl").read_text()
                  .splitlines() if line]  # fmt: skip
        assert len(states) == 3 * CYCLES  # installing, committed, rolled_back per cycle
