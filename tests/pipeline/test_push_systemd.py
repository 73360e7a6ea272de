"""The `systemd` service kind end to end: real pushes to a sandbox host that is a container
with REAL systemd 252 as PID 1 (sandbox/ddtree_sandbox/systemd_host.py): its sshd and
`sglang.service` (EnvironmentFile= the serve file, Restart=always) are systemd's units.

A push restarts the unit with `systemctl stop` + `start` and the patchset's [serve] flags reach the
server through `EnvironmentFile=`; a start that crashes loops under Restart=always and the
health wait ends at the first restart (the real NRestarts grew) although the service allows
900 s, then the rollback leaves the unit active on the old code and flags; a fail pattern in
the unit's journal (read after the real cursor) ends the wait as well.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import urllib.request

import pytest

from tests.support import REPO, make_patchset, utils_file

pytestmark = pytest.mark.hosts

DDTREE_FLAGS = ["--speculative-algorithm", "DDTREE", "--speculative-ddtree-budget", "24"]


@pytest.fixture
def unit_host(sandbox_factory, tmp_path):
    """One sandbox host with kind = "systemd" (real systemd); its inventory's ready_timeout_s
    is 900 s, so only the watchdog can end a failed start early."""
    from tests.pipeline.conftest import Deploy

    sandbox = sandbox_factory(1, service_kind="systemd")
    inv = sandbox.inventory_path
    text = inv.read_text()
    assert 'kind = "systemd"' in text and "ready_timeout_s = 60\n" in text, text
    inv.write_text(text.replace("ready_timeout_s = 60\n", "ready_timeout_s = 900\n"))
    return Deploy(sandbox=sandbox, patchsets=make_patchset(tmp_path / "fast"))


def _with_serve_flags(root):
    toml = root / "patchset.toml"
    toml.write_text(toml.read_text() + f"\n[serve]\nargs = {json.dumps(DDTREE_FLAGS)}\n")


def _crash_at_start(root):
    _with_serve_flags(root)
    path = utils_file(root)
    path.write_text(path.read_text() + "\nraise RuntimeError('deliberately crashed at start')\n")


def _scheduler_exception_then_hang(root):
    path = utils_file(root)
    path.write_text(path.read_text() + "\nimport time as _t\n"
                    "print('[stub] Scheduler hit an exception: RuntimeError: deliberate',"
                    " flush=True)\n_t.sleep(3600)\n")  # fmt: skip


def events_of(stdout: str) -> list[dict]:
    return [json.loads(line) for line in stdout.splitlines() if line.startswith("{")]


def systemctl(host, *args: str) -> str:
    """What `systemctl ARGS` prints in the host's container (its real systemd)."""
    return host.run(["systemctl", *args]).stdout.strip()


def journal(host, *args: str) -> str:
    return host.run(["journalctl", "-u", "sglang.service", "--no-pager", *args]).stdout


def server_info(host) -> dict:
    url = f"http://{host.address}:30000/server_info"
    with urllib.request.urlopen(url, timeout=10) as response:
        return json.loads(response.read())


def test_a_push_restarts_the_unit_and_its_flags_come_through_the_environment_file(
    unit_host, tmp_path
):
    host = unit_host.host
    patchsets = make_patchset(tmp_path / "p", mutate=_with_serve_flags)
    done = unit_host.cli("push", "-H", "host0", "--json", patchsets=patchsets)
    assert done.returncode == 0, done.stderr[-3000:]
    events = events_of(done.stdout)
    assert ("restart", "ok") in [(e["stage"], e["event"]) for e in events]
    assert systemctl(host, "is-active", "sglang.service") == "active"
    state = dict(line.split("=", 1) for line in systemctl(host, "show", "sglang").splitlines())
    assert state["ActiveState"] == "active" and state["NRestarts"] == "0", state
    info = server_info(host)
    # the host's own flags (inventory serve.args) and the patchset's [serve], as launched
    assert info["launch_args"] == ["--host", host.address, "--port", "30000", *DDTREE_FLAGS]
    assert info["speculative_ddtree_budget"] == 24
    assert str(state["MainPID"]) in systemctl(host, "show", "-p", "MainPID", "sglang")
    # the start's progress marks came from the unit's journal
    marks = [e["data"]["progress"]["pattern"] for e in events
             if e["stage"] == "health" and e["event"] == "info"]  # fmt: skip
    assert "Load weight end" in marks, marks


def test_a_start_that_crashes_loops_and_is_rolled_back_at_the_first_restart(unit_host, tmp_path):
    """Real systemd, Restart=always: the new code crashes the server while it starts, systemd
    restarts it; the health wait (900 s allowed, no fail patterns) ends when the real
    NRestarts grew, the push rolls back. Timed from the first crash in the unit's journal
    (same clock: the container shares the machine's kernel) to the health failure event,
    read as the CLI streams it."""
    host = unit_host.host
    inv = unit_host.sandbox.inventory_path  # the restart loop alone: no fail patterns
    inv.write_text(inv.read_text().replace("ready_timeout_s = 900", "ready_timeout_s = 900\n"
                                           "fail_patterns = []"))  # fmt: skip
    assert systemctl(host, "show", "-p", "Restart", "sglang.service") == "Restart=always"
    before = host.tree_digest()
    serve_before = (host.service_dir_on_disk / "sglang.env").read_bytes()
    patchsets = make_patchset(tmp_path / "p", mutate=_crash_at_start)
    since = time.time()
    code, lines, arrived = stream_cli(unit_host, "push", "-H", "host0", "--json",
                                      patchsets=patchsets)  # fmt: skip
    done_at = time.time()
    assert code == 1, lines[-20:]
    events = events_of("\n".join(lines))
    failed = [e for e in events if e["stage"] == "health" and e["event"] == "fail"]
    assert len(failed) == 1, failed
    message = failed[0]["message"]
    assert "restart loop: systemd restarted it" in message and "NRestarts 0 -> " in message, message
    assert failed[0]["duration_s"] < 60, failed  # the service allowed 900 s
    assert host.tree_digest() == before
    assert (host.service_dir_on_disk / "sglang.env").read_bytes() == serve_before
    assert [e["state"] for e in unit_host.journal()] == ["installing", "rolled_back"]
    assert systemctl(host, "is-active", "sglang.service") == "active"
    assert server_info(host)["launch_args"] == ["--host", host.address, "--port", "30000"]
    # the unit's real journal: the crash, systemd's restart counter, the rollback's start
    shown = journal(host, "-o", "short-unix", f"--since=@{since:.0f}").splitlines()
    crashes = [float(line.split()[0]) for line in shown if "Main process exited" in line]
    assert crashes, shown
    assert any("restart counter is at 1" in line for line in shown), shown
    caught_at = arrived[lines.index(_line_of(lines, failed[0]))]
    after_crash_s = caught_at - crashes[0]
    print("\n".join(["", "journal of sglang.service during the push (journalctl -o short-unix):",
                     *[line for line in shown if "deliberately" in line or "systemd[" in line
                       or "Scheduled restart" in line], ""]))  # fmt: skip
    print(f"restart loop: health failed {after_crash_s:.1f} s after the first crash "
          f"({failed[0]['duration_s']:.1f} s after health began), push exit 1 "
          f"{done_at - crashes[0]:.1f} s after the first crash, rollback included "
          f"(ready_timeout_s = 900)")  # fmt: skip
    assert after_crash_s < 30, after_crash_s  # target <= 15 s; bound loose for a loaded CI


def _line_of(lines: list[str], event: dict) -> str:
    return next(line for line in lines if line.startswith("{") and json.loads(line) == event)


def stream_cli(deploy, *args: str, patchsets) -> tuple[int, list[str], list[float]]:
    """Run the CLI, reading its stdout line by line: (exit code, lines, the time each
    arrived)."""
    argv = [sys.executable, "-m", "ddtree_deploy", *args, "-i", str(deploy.sandbox.inventory_path),
            "--patchsets-dir", str(patchsets)]  # fmt: skip
    lines, arrived = [], []
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    with subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                          cwd=REPO, env=env) as proc:  # fmt: skip
        assert proc.stdout is not None
        for line in proc.stdout:
            lines.append(line.rstrip("\n"))
            arrived.append(time.time())
        code = proc.wait(timeout=600)
    return code, lines, arrived


def test_a_fail_pattern_in_the_journal_ends_the_wait(unit_host, tmp_path):
    host = unit_host.host
    before = host.tree_digest()
    patchsets = make_patchset(tmp_path / "p", mutate=_scheduler_exception_then_hang)
    done = unit_host.cli("push", "-H", "host0", "--json", patchsets=patchsets)
    assert done.returncode == 1, done.stderr[-3000:]
    failed = [e for e in events_of(done.stdout) if e["stage"] == "health" and e["event"] == "fail"]
    assert len(failed) == 1 and "fail pattern 'Scheduler hit an exception'" in failed[0]["message"]
    assert failed[0]["duration_s"] < 30, failed
    assert host.tree_digest() == before
    assert systemctl(host, "is-active", "sglang.service") == "active"
    print(f"\njournal fail line: health failed after {failed[0]['duration_s']:.1f} s")


def test_a_real_sglang_server_is_the_unit_and_a_push_restarts_it(sandbox_factory, tmp_path):
    """The unit's ExecStart is the sandbox's real `python -m sglang.launch_server
    $SGLANG_ARGS` (EnvironmentFile= the serve file, the tiny target on CPU); a push of the
    fast patchset restarts it through systemctl and it serves again on the new files."""
    from tests.pipeline.conftest import Deploy

    sandbox = sandbox_factory(1, service="sglang", service_kind="systemd")
    host = sandbox.hosts[0]
    inv = sandbox.inventory_path  # a real start takes 30-80 s on 2 loaded cores
    inv.write_text(inv.read_text().replace("ready_timeout_s = 60\n", "ready_timeout_s = 300\n"))
    deploy = Deploy(sandbox=sandbox, patchsets=make_patchset(tmp_path / "fast"))
    show = dict(line.split("=", 1) for line in systemctl(host, "show", "sglang").splitlines())
    assert "-m sglang.launch_server $SGLANG_ARGS" in show["ExecStart"], show["ExecStart"]
    main_pid = show["MainPID"]
    cmdline = host.run(["cat", f"/proc/{main_pid}/cmdline"]).stdout.replace("\0", " ")
    assert "sglang.launch_server --model-path" in cmdline, cmdline
    done = deploy.cli("push", "-H", "host0", "--json", timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    after = dict(line.split("=", 1) for line in systemctl(host, "show", "sglang").splitlines())
    assert after["ActiveState"] == "active" and after["NRestarts"] == "0", after
    assert after["MainPID"] != main_pid  # restarted by the push's systemctl stop + start
    assert "The server is fired up and ready to roll" in journal(host, "-o", "cat", "-n", "200")
    print(f"\nreal sglang under systemd: sandbox up in {sandbox.timings_s['total_s']:.0f} s")
