"""Fault cells on a container target: the host is a real sshd sandbox host and the target
is a REAL Docker container of the session's private dockerd (the agent relays into it with
`docker exec`, the restart is `docker restart`). Each cell runs on a fresh container (sg3,
inventory host c3) and ends as the root matrix's cells end: the container's tree is the
image's (before) or the patchset's (after), never between; the container runs; no lock is
left; the journal ends committed or rolled back (after `recover` where the cell needs it).

The faults need no hold inside the container: a compile error and a failed import are the
patchset's own; the controller's SIGKILL, an SSH cut and `docker stop` strike when the push's
`restart` (or `install`) stage starts, whichever moment of it they land on: every moment
must end before or after.
"""

from __future__ import annotations

import json
import os
import signal
import time
import tomllib
from pathlib import Path

import pytest
import tomli_w

from ddtree_sandbox.processes import read_cmdline
from tests.containers.conftest import READY_LINE, Bench, wait_ready
from tests.containers.test_container_hosts import container_view, image_view, results
from tests.faults.hostside import _mount_ns, kill_all, session_pids
from tests.faults.runner import CLI_TIMEOUT_S, Push, _bad_import, relock_without_compiling
from tests.support import make_patchset, run_cli, utils_file

pytestmark = [pytest.mark.hosts, pytest.mark.slow]
NAME, HOST = "sg3", "c3"


@pytest.fixture
def c3(bench: Bench, tmp_path) -> Path:
    """A fresh container sg3 as inventory host c3 (its own state dir); the inventory path."""
    bench.containers.run(NAME)
    wait_ready(bench.containers, NAME, 0)
    data = tomllib.loads(bench.inventory.read_text())
    host = dict(data["hosts"]["c0"], container=NAME, state_dir=f"/var/lib/ddtree-deploy/{NAME}")
    data["hosts"] = {HOST: host}
    inventory = tmp_path / "inventory.toml"
    inventory.write_text(tomli_w.dumps(data))
    try:
        yield inventory
    finally:
        bench.containers.remove(NAME)
        state = bench.host.state_dir_on_disk / NAME
        for name in ("journal.jsonl", "lock"):
            (state / name).unlink(missing_ok=True)


def _broken(root: Path) -> Path:
    dirs = make_patchset(root, suites=["integrity"])
    version = dirs / "ddtree" / "1.0.0"
    utils_file(version).write_text(utils_file(version).read_text() + "\ndef broken(:\n")
    relock_without_compiling(version)
    return dirs


def _journal(bench: Bench) -> list[dict]:
    path = bench.host.state_dir_on_disk / NAME / "journal.jsonl"
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _agents(bench: Bench) -> list[int]:
    """Agent processes in the sandbox host's namespace (the relay side of a container op)."""
    ns = _mount_ns(bench.host.sshd_pid())
    return [int(e.name) for e in Path("/proc").iterdir()
            if e.name.isdigit() and "ddtree-agent" in read_cmdline(int(e.name))
            and _mount_ns(int(e.name)) == ns]  # fmt: skip


def _wait_agents_gone(bench: Bench, timeout_s: float = 120.0) -> None:
    deadline = time.monotonic() + timeout_s
    while _agents(bench) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not _agents(bench), "an agent is still running on the host"


def _wait_stage(push: Push, stage: str, timeout_s: float = 180.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and push.proc.poll() is None:
        if any(e.get("stage") == stage and e["event"] == "start" for e in push.events):
            return
        time.sleep(0.02)
    raise AssertionError(f"the push never reached {stage}: {push.events[-5:]}")


def _cut_ssh(bench: Bench) -> int:
    return kill_all(session_pids(bench.host.sshd_pid()))


def _ends_before_or_after(bench: Bench, inventory: Path, patchsets: Path, said: str) -> str:
    """Recover when the journal is unfinished; then the container's tree is the image's or
    the patchset's, it runs, no lock is left. Returns "before" or "after"."""
    if _journal(bench) and _journal(bench)[-1]["state"] in ("installing", "rollback_failed"):
        done = run_cli("recover", "-H", HOST, "-i", str(inventory), timeout=CLI_TIMEOUT_S)
        assert done.returncode == 0, said + done.stderr[-3000:]
    image, view = image_view(bench), container_view(bench, NAME)
    after = {**image, **{p.removeprefix("sglang/"): h for p, h in results(patchsets).items()}}
    assert view in (image, after), f"the container's tree is neither before nor after\n{said}"
    assert bench.containers.inspect(NAME)["State"]["Running"], said
    assert not (bench.host.state_dir_on_disk / NAME / "lock").exists(), said
    states = [e["state"] for e in _journal(bench)]
    assert not states or states[-1] in ("committed", "rolled_back"), states
    return "before" if view == image else "after"


def _push(inventory: Path, patchsets: Path) -> Push:
    return Push.start(inventory, patchsets, "-H", HOST)


@pytest.mark.parametrize("fault", ["compile_error", "import_error"])
def test_a_broken_patchset_is_rolled_back_in_the_container(bench, c3, tmp_path, fault):
    if fault == "compile_error":
        patchsets = _broken(tmp_path / "ps")
    else:
        patchsets = make_patchset(tmp_path / "ps", suites=["imports"], mutate=_bad_import)
    code, err = _push(c3, patchsets).finish()
    assert code == 1, err[-3000:]
    assert _ends_before_or_after(bench, c3, patchsets, err[-3000:]) == "before"
    assert _journal(bench)[-1]["state"] == "rolled_back"


@pytest.mark.parametrize("stage", ["install", "restart"])
def test_the_controller_killed_mid_push_then_recover(bench, c3, tmp_path, stage):
    patchsets = make_patchset(tmp_path / "ps", suites=["integrity"])
    push = _push(c3, patchsets)
    _wait_stage(push, stage)
    os.kill(push.proc.pid, signal.SIGKILL)
    push.proc.wait()
    _wait_agents_gone(bench)
    _ends_before_or_after(bench, c3, patchsets, f"killed at {stage}")


def test_an_ssh_cut_during_the_container_restart(bench, c3, tmp_path):
    patchsets = make_patchset(tmp_path / "ps", suites=["integrity"])
    push = _push(c3, patchsets)
    _wait_stage(push, "restart")
    assert _cut_ssh(bench) > 0, "no sshd session to cut"
    code, err = push.finish()
    _wait_agents_gone(bench)
    assert code in (1, 3), err[-3000:]  # lost at restart: rolled back, or told to recover
    assert _ends_before_or_after(bench, c3, patchsets, err[-3000:]) == "before"


def test_the_container_stopped_while_the_push_installs(bench, c3, tmp_path):
    """`docker stop` as the install starts: the install lands in the stopped container's
    layer or the relay fails; either way the push's `docker restart` brings the container
    back on the patch (exit 0, after), or the push fails naming the container and ends
    before. Seen here: the install had finished (0.01 s), the restart started the
    container again, health passed: exit 0."""
    patchsets = make_patchset(tmp_path / "ps", suites=["integrity"])
    push = _push(c3, patchsets)
    _wait_stage(push, "install")
    stopped = bench.containers.docker("stop", "-t", "1", NAME)
    assert stopped.returncode == 0, stopped.stderr
    code, err = push.finish()
    _wait_agents_gone(bench)
    assert code in (0, 1, 3), err[-3000:]
    if code:
        assert NAME in err, err[-3000:]  # the message names the container
        if not bench.containers.inspect(NAME)["State"]["Running"]:
            seen = bench.containers.console(NAME).count(READY_LINE)
            bench.containers.docker("start", NAME)
            wait_ready(bench.containers, NAME, seen)
    end = _ends_before_or_after(bench, c3, patchsets, err[-3000:])
    assert end == ("after" if code == 0 else "before"), err[-3000:]
