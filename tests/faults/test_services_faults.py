"""Faults at the SECOND of two services' restart and health (a host with
[[hosts.NAME.services]]), with the fault matrix's invariant: the host's sglang tree ends
all-old (never a mix), BOTH services run, the journal holds no unfinished deploy (after
`recover` where the controller died), and the lock is released.

The first service (gpu0) is the fault host's own stub; the second (gpu1) is a copy of it
on port 30001 whose start refuses while the patch is installed, or which the agent is
held at (tests/faults/hostside.py: the nth call of an op) while SSH is cut or the
controller is SIGKILLed; with `stagger_s` (both started 1 s apart, the health waits after
the last start) the cut comes at the second start and the SIGKILL at its health wait.
`make test` runs the refusal; `make faults` all five (measured here: 37 s, 47 s, 49 s on 2
loaded cores for the first three).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import tomllib

import pytest

from ddtree_sandbox.inventory_file import render_toml
from tests.faults.hostside import HOST_PYTHON, SERVICE, SITE
from tests.faults.matrix import Cell
from tests.faults.runner import CLI_TIMEOUT_S, Push, patchsets_for
from tests.support import run_cli

pytestmark = pytest.mark.hosts

PATCHED = "sglang/srt/speculative/ddtree_utils.py"
SECOND = f"{SERVICE}2/sglang_stub.py"


def _second_service(fh, refuse_new_code: bool, stagger_s: float | None = None) -> None:
    """Add gpu1 (a stub copy on port 30001, started now) after the host's own service."""
    host = fh.host
    first = host.service_dir_on_disk
    second = first.with_name("service2")
    second.mkdir()
    host.write_stub_config(imports="patched")  # topology, not sglang: ~5 s less per start
    shutil.copy2(first / "sglang_stub.py", second / "sglang_stub.py")
    config = {**host.read_stub_config(), "port": 30001}
    (second / "stub.json").write_text(json.dumps(config) + "\n")
    assert host.run([HOST_PYTHON, SECOND, "start"]).returncode == 0
    start = f"{HOST_PYTHON} {SECOND} start"
    if refuse_new_code:
        start = f"/bin/sh -c 'test -e {SITE}/{PATCHED} && exit 1; exec {start}'"
    data = tomllib.loads(fh.sandbox.inventory_path.read_text())
    shared = data["defaults"]["service"]
    own = data["hosts"]["host0"].pop("service", {})
    gpu0 = {"name": "gpu0", **{k: shared[k] for k in ("start", "stop", "status", "log_file")}}
    gpu0.update(own)
    gpu1 = {
        "name": "gpu1",
        "start": start,
        "stop": f"{HOST_PYTHON} {SECOND} stop",
        "status": f"{HOST_PYTHON} {SECOND} status",
        "log_file": f"{SERVICE}2/server.log",
        "health_url": f"http://{host.address}:30001/health_generate",
    }
    data["hosts"]["host0"]["services"] = [gpu0, gpu1]
    if stagger_s is not None:  # both started stagger_s apart, health waited after the last
        data["hosts"]["host0"]["stagger_s"] = stagger_s
    fh.sandbox.inventory_path.write_text(render_toml(data))


@pytest.fixture
def two_service_host(fault_host):
    yield fault_host
    fault_host.host.run([HOST_PYTHON, SECOND, "stop"])


def _both_running(fh) -> list[bool]:
    return [fh.host.run([HOST_PYTHON, script, "status"]).returncode == 0
            for script in (f"{SERVICE}/sglang_stub.py", SECOND)]  # fmt: skip


@pytest.mark.parametrize(
    ("op", "fault", "exit_code", "stagger_s"),
    [
        pytest.param("health", "ssh_cut", 1, None, marks=pytest.mark.slow),
        pytest.param("restart", "sigkill", -9, None, marks=pytest.mark.slow),
        ("restart", "service_refuses", 1, None),
        pytest.param("restart", "ssh_cut", 1, 1.0, marks=pytest.mark.slow),
        pytest.param("health", "sigkill", -9, 1.0, marks=pytest.mark.slow),
    ],
    ids=[
        "second-health-ssh-cut",
        "second-restart-sigkill",
        "second-refuses-new-code",
        "staggered-second-restart-ssh-cut",
        "staggered-second-health-sigkill",
    ],
)
def test_a_fault_at_the_second_service_leaves_all_old_code_and_both_running(
    two_service_host, tmp_path, op, fault, exit_code, stagger_s
):
    fh = two_service_host
    _second_service(fh, refuse_new_code=fault == "service_refuses", stagger_s=stagger_s)
    fh.start_service()
    patchsets = patchsets_for(Cell(op, fault, exit_code, "before"), tmp_path / "ps")
    before = fh.digest()
    held = fault != "service_refuses"
    if held:
        fh.hold_at(op, nth=2)
    push = Push.start(fh.sandbox.inventory_path, patchsets)
    if held:
        fh.wait_paused(push.proc)
        if fault == "ssh_cut":
            seen = len(push.events)
            assert fh.cut_ssh() > 0, "no sshd session to cut"
            push.wait_next_request_or_exit(seen)
        else:
            os.kill(push.proc.pid, signal.SIGKILL)
            push.proc.wait()
        fh.release()
    code, err = push.finish()
    fh.wait_agents_gone()
    assert code == exit_code, err[-3000:]
    if fault == "sigkill":  # the journal says installing: recover restores and restarts both
        assert fh.journal()[-1]["state"] == "installing"
        inv = str(fh.sandbox.inventory_path)
        done = run_cli("recover", "-H", "host0", "-i", inv, timeout=CLI_TIMEOUT_S)
        assert done.returncode == 0, done.stderr[-3000:]
    else:
        assert "gpu1" in err, err[-3000:]  # the summary names the service
    assert fh.digest() == before
    assert fh.journal()[-1]["state"] == "rolled_back", fh.journal()
    assert fh.lock() is None
    assert _both_running(fh) == [True, True]
