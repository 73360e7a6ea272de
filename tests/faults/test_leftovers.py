"""What a failure must not leave behind, on real sshd hosts: a partial backup after a full
disk (shown by `backups list` as if it were one), a host lock after a preflight answer the
controller cannot read (every next run exit 4), and a "run recover" from `status` while a
live push holds the host."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.faults.hostside import SERVICE, STATE_DIR
from tests.fleet.conftest import parse_events, summaries
from tests.support import REPO, make_patchset, run_cli

pytestmark = pytest.mark.hosts
HOST_PYTHON = "/srv/venv/bin/python"

# The host's python behind a filter that renames one key of the facts record in the first
# answer that also holds lock_acquire (a push's or rollback's preflight): the agent really
# takes the lock, but the controller cannot read that answer as Facts.
GARBLE = f"""#!{HOST_PYTHON}
import os, subprocess, sys
if sys.argv[1:2] != ["-c"]:
    os.execv(sys.executable, [sys.executable, *sys.argv[1:]])
agent = subprocess.Popen([sys.executable, *sys.argv[1:]], stdout=subprocess.PIPE)
garbled = False
for line in iter(agent.stdout.readline, b""):
    if not garbled and b'"lock_acquire"' in line:
        line, garbled = line.replace(b'"agent_pid"', b'"agent_pid_"'), True
    sys.stdout.buffer.write(line)
    sys.stdout.buffer.flush()
sys.exit(agent.wait())
"""


def _cli(sandbox, *args: str, patchsets=None):
    extra = ["-i", str(sandbox.inventory_path)]
    if patchsets is not None:
        extra += ["--patchsets-dir", str(patchsets)]
    return run_cli(*args, *extra)


def test_a_backup_cut_by_a_full_disk_leaves_no_backup(fault_host, tmp_path):
    """The state dir fills while the backup op copies: the push ends rolled back with
    site-packages untouched, and no backups/<deploy> dir is left for `backups list`,
    prune or rollback to take for a backup."""
    patchsets = make_patchset(tmp_path)
    host = fault_host.host
    host.run(["mkdir", "-m", "700", "-p", STATE_DIR])
    fault_host.tmpfs_over(STATE_DIR, "4m")
    before = fault_host.digest()
    fault_host.hold_at("backup")
    out = tmp_path / "push.jsonl"
    inv = str(fault_host.sandbox.inventory_path)
    argv = [sys.executable, "-m", "ddtree_deploy", "push", "-H", "host0", "--json",
            "-i", inv, "--patchsets-dir", str(patchsets)]  # fmt: skip
    with out.open("w") as stdout:
        push = subprocess.Popen(argv, stdout=stdout, stderr=subprocess.PIPE, text=True, cwd=REPO)
        fault_host.wait_paused(push)
        fault_host.fill(STATE_DIR)
        fault_host.release()
        _, err = push.communicate(timeout=240)
    summary = summaries(parse_events(out.read_text()))["host0"]
    assert push.returncode == 1, err
    assert "No space left" in summary.message, summary
    assert summary.message.endswith("site-packages untouched"), summary
    left = host.run(["ls", "-A", f"{STATE_DIR}/backups"])  # inside the host's namespace
    assert left.returncode == 0 and left.stdout.split() == [], left.stdout
    fault_host.clear_faults()
    listed = _cli(fault_host.sandbox, "backups", "list", "-H", "host0", "--json")
    assert listed.returncode == 0, listed.stderr
    summary = summaries(parse_events(listed.stdout))["host0"]
    assert summary.data["outcome"] == "ok"
    status = _cli(fault_host.sandbox, "status", "-H", "host0", "--json")
    events = [json.loads(x) for x in status.stdout.splitlines()]
    assert fault_host.digest() == before
    assert not any("broken" in json.dumps(e) for e in events)
    assert fault_host.lock() is None


def test_an_unreadable_preflight_answer_releases_its_lock(sandbox_factory, tmp_path):
    """The agent took the lock but its answer cannot be read as Facts: the push needs
    attention (exit 3, the error named), the lock is released, and the next push (with a
    python that answers properly) is not refused as locked (exit 4) but deploys."""
    sandbox = sandbox_factory(1)
    patchsets = make_patchset(tmp_path)
    garble = sandbox.hosts[0].service_dir_on_disk / "garblepy"
    garble.write_text(GARBLE)
    garble.chmod(0o755)
    inv = sandbox.inventory_path
    good = inv.read_text()
    inv.write_text(good.replace(f'python = "{HOST_PYTHON}"', f'python = "{SERVICE}/garblepy"', 1))

    done = _cli(sandbox, "push", "-H", "host0", "--json", patchsets=patchsets)
    assert done.returncode == 3, done.stderr
    message = summaries(parse_events(done.stdout))["host0"].message
    assert message.startswith("unreadable answer from the host:") and "agent_pid" in message
    assert not (sandbox.hosts[0].state_dir_on_disk / "lock").exists()

    inv.write_text(good)
    again = _cli(sandbox, "push", "-H", "host0", patchsets=patchsets)
    assert again.returncode == 0, again.stderr


def test_status_during_a_live_push_names_its_holder_not_recover(sandbox_factory, tmp_path):
    """While a push waits for its server to start, its deploy is `installing`: status says
    the deploy is in progress and who holds the host (exit 0), not "run recover"."""
    sandbox = sandbox_factory(1)
    host = sandbox.hosts[0]
    patchsets = make_patchset(tmp_path)
    inv = sandbox.inventory_path
    faster = "ready_timeout_s = 60\npoll_interval_s = 0.2"
    inv.write_text(inv.read_text().replace("ready_timeout_s = 60", faster))
    host.write_stub_config(startup_delay_s=15)
    argv = [sys.executable, "-m", "ddtree_deploy", "push", "-H", "host0", "-i", str(inv),
            "--patchsets-dir", str(patchsets), "--json"]  # fmt: skip
    first = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                             cwd=REPO)  # fmt: skip
    for line in first.stdout:
        event = json.loads(line)
        if event["stage"] == "restart" and event["event"] == "start":
            break
    status = _cli(sandbox, "status", "-H", "host0", "--json")
    first.communicate(timeout=180)
    assert first.returncode == 0
    assert status.returncode == 0, status.stderr
    message = summaries(parse_events(status.stdout))["host0"].message
    assert "in progress: host locked by" in message and f"pid {first.pid}" in message, message
    assert "recover" not in message
