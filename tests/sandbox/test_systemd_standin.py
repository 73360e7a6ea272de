"""The sandbox's systemd TEST STAND-IN: unit-file reading as systemd reads it (pure), and
real units run by its supervisor: Restart= counting NRestarts (control: Restart=no never
counts), the start limit, ActiveState, the journal with cursors, stop ending the process
group, and refusals of what real systemctl/journalctl would refuse."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ddtree_sandbox import systemd_standin
from ddtree_sandbox import systemd_unitfile as sd

STANDIN = Path(systemd_standin.__file__)


def test_unit_files_read_as_systemd_reads_them():
    text = "[Unit]\nDescription=x\n# c\n; c\n[Service]\nExecStart=/bin/a \\\n  b\n" \
        "Environment=A=1\nEnvironment=\nEnvironment=B=2\n"  # fmt: skip
    sections = sd.parse_unit(text)
    assert sections["Service"]["ExecStart"] == ["/bin/a  b"]
    assert sections["Service"]["Environment"] == ["B=2"]  # an empty assignment resets
    assert sd.split_words("""/bin/x "a b" 'c d' e\\ f""") == ["/bin/x", "a b", "c d", "e f"]
    with pytest.raises(sd.UnitError):
        sd.split_words('/bin/x "open')


def test_exec_start_expansion_splits_dollar_var_and_keeps_braced_var_one_word():
    env = {"ARGS": "--a 1  --b 2", "ONE": "x y"}
    words = ["/bin/p", "$ARGS", "${ONE}", "pre-${ONE}", "$$HOME", "$UNSET"]
    assert sd.expand_command(words, env) == ["/bin/p", "--a", "1", "--b", "2", "x y", "pre-x y",
                                             "$HOME"]  # fmt: skip


def test_environment_file_and_time_spans_and_specifiers(tmp_path):
    env_file = tmp_path / "e"
    env_file.write_text("# c\nSGLANG_ARGS=\"--model-path /m --port 1\"\nB='q'\n; c\nC=plain\n")
    assert sd.read_environment_file(str(env_file)) == {
        "SGLANG_ARGS": "--model-path /m --port 1", "B": "q", "C": "plain",
    }  # fmt: skip
    assert sd.parse_seconds("100ms") == pytest.approx(0.1)
    assert sd.parse_seconds("1min 30s") == 90
    assert sd.parse_seconds("5") == 5
    with pytest.raises(sd.UnitError):
        sd.parse_seconds("soon")
    resolved = sd.resolve_specifiers("%n %N %i %%", "sglang@3.service")
    assert resolved == "sglang@3.service sglang@3 3 %"
    with pytest.raises(sd.UnitError):
        sd.resolve_specifiers("%Z", "a.service")


@pytest.fixture
def standin(tmp_path):
    """run(tool, *args) -> CompletedProcess against a fresh root; unit(name, service lines)."""
    root = tmp_path / "sd"
    (root / "units").mkdir(parents=True)
    env = {**os.environ, "DDTREE_SYSTEMD_STANDIN_ROOT": str(root)}
    started: list[str] = []

    def run(tool: str, *args: str) -> subprocess.CompletedProcess[str]:
        argv = [sys.executable, str(STANDIN), tool, *args]
        return subprocess.run(argv, env=env, capture_output=True, text=True, timeout=60)

    def unit(name: str, *lines: str, head: str = "") -> None:
        body = "\n".join(lines)
        (root / "units" / name).write_text(f"[Unit]\n{head}\n[Service]\n{body}\n")
        started.append(name)

    yield run, unit
    for name in started:
        run("systemctl", "stop", name)


def show(run, name: str) -> dict[str, str]:
    out = run("systemctl", "show", "-p", "ActiveState,SubState,NRestarts,Result", name).stdout
    return dict(line.split("=", 1) for line in out.splitlines())


def wait_for(check, timeout_s: float = 20.0):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(0.1)
    raise AssertionError("condition not met in time")


@pytest.mark.parametrize("restart", ["on-failure", "no"])
def test_a_crashing_unit_loops_and_counts_restarts_only_with_restart(standin, restart):
    run, unit = standin
    unit("crash.service", "ExecStart=/bin/sh -c 'echo crashing; sleep 0.2; exit 1'",
         f"Restart={restart}", "RestartSec=100ms",
         head="StartLimitBurst=3\nStartLimitIntervalSec=30s")  # fmt: skip
    assert run("systemctl", "restart", "crash").returncode == 0
    state = wait_for(lambda: (s := show(run, "crash.service"))["ActiveState"] == "failed" and s)
    if restart == "no":  # control: dead at once, never restarted
        assert state["NRestarts"] == "0" and state["Result"] == "exit-code", state
        return
    # 3 starts, then the 3rd scheduled restart hits StartLimitBurst=3 (counted, as systemd's)
    assert state["NRestarts"] == "3" and state["Result"] == "start-limit-hit", state
    journal = run("journalctl", "-u", "crash.service", "--no-pager", "-o", "cat").stdout
    assert journal.count("crashing") == 3
    assert "crash.service: Scheduled restart job, restart counter is at 3." in journal
    assert run("systemctl", "is-active", "crash.service").returncode == 3
    # a manual restart starts the count again, as systemd's does
    unit("crash.service", "ExecStart=/bin/sleep 30", "Restart=on-failure")
    assert run("systemctl", "restart", "crash.service").returncode == 0
    assert show(run, "crash.service")["NRestarts"] == "0"


def test_environment_file_reaches_exec_start_and_stop_ends_the_group(standin, tmp_path):
    run, unit = standin
    (tmp_path / "serve.env").write_text('SGLANG_ARGS="--a 1 --b 2"\n')
    unit("srv.service", f"EnvironmentFile={tmp_path}/serve.env",
         "ExecStart=/bin/sh -c 'echo args: \"$$@\"; sleep 60 & wait' srv $SGLANG_ARGS")  # fmt: skip
    assert run("systemctl", "start", "srv.service").returncode == 0
    assert run("systemctl", "is-active", "srv.service").stdout.strip() == "active"
    main_pid = int(run("systemctl", "show", "-p", "MainPID", "--value", "srv").stdout)
    wait_for(lambda: "args: --a 1 --b 2" in run("journalctl", "-u", "srv", "-o", "cat").stdout)
    out = run("journalctl", "-u", "srv", "-n", "1", "--show-cursor", "-o", "cat").stdout
    cursor = out.splitlines()[-1].removeprefix("-- cursor: ")
    assert out.splitlines()[-1].startswith("-- cursor: s=") and ";i=" in cursor
    after = run("journalctl", "-u", "srv", f"--after-cursor={cursor}", "-o", "cat")
    assert after.returncode == 1 and after.stdout == ""  # nothing new: no entries
    assert run("systemctl", "stop", "srv.service").returncode == 0
    assert run("systemctl", "is-active", "srv.service").stdout.strip() == "inactive"
    assert not os.path.exists(f"/proc/{main_pid}")  # the group, background sleep too
    newer = run("journalctl", "-u", "srv", f"--after-cursor={cursor}", "-o", "cat").stdout
    assert newer.strip() == "Stopped srv.service."


def test_what_real_systemd_refuses_is_refused(standin):
    run, unit = standin
    assert run("systemctl", "restart", "missing.service").returncode == 5
    assert run("systemctl", "frobnicate", "x").returncode == 1
    assert run("journalctl", "-u", "x", "--since-forever").returncode == 1
    unit("two.service", "ExecStart=/bin/true", "ExecStart=/bin/false")
    assert run("systemctl", "start", "two.service").returncode == 5
    unit("rel.service", "ExecStart=true")  # systemd needs an absolute path (or a search path
    # entry in v239+; the stand-in is stricter, never looser)
    assert run("systemctl", "start", "rel.service").returncode != 0
    unit("bad.service", "ExecStart=/bin/true", "Restart=sometimes")
    assert run("systemctl", "start", "bad.service").returncode == 5
