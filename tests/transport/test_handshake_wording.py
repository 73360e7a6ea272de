"""A peer that is no SSH server gets one clean line per host, one wording per condition,
and none of Paramiko's tracebacks (its transport thread logs a failed handshake as ERROR
lines with a traceback, which Python's last-resort handler would print to stderr): a
peer that answers junk and closes, one that closes at once, one that never speaks, and
a refused port. The control runs Paramiko alone against the silent peer: its traceback
reaches stderr there, so the check below has something to catch."""

from __future__ import annotations

import socket
import subprocess
import sys
import threading
import time

import pytest

from tests.support import REPO, run_cli

TIMEOUT_S = 2


def _serve(mode: str) -> int:
    """A TCP listener on 127.0.0.1 that answers as `mode` says; returns its port."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    held: list[socket.socket] = []

    def loop() -> None:
        while True:
            conn, _ = listener.accept()
            if mode == "junk":
                conn.sendall(b"HTTP/1.1 400 Bad Request\r\n\r\n")
                conn.close()
            elif mode == "close":
                conn.close()
            else:  # silent: keep it open, say nothing
                held.append(conn)

    threading.Thread(target=loop, daemon=True).start()
    return listener.getsockname()[1]


@pytest.fixture(scope="module")
def peers(tmp_path_factory) -> dict[str, int]:
    ports = {mode: _serve(mode) for mode in ("junk", "close", "silent")}
    spare = socket.socket()
    spare.bind(("127.0.0.1", 0))
    ports["refused"] = spare.getsockname()[1]  # bound, never listening: refused
    spare.close()
    return ports


def test_one_clean_line_per_host_and_no_paramiko_traceback(peers, tmp_path):
    inventory = tmp_path / "peers.toml"
    inventory.write_text("".join(
        f'[hosts.{mode}]\naddress = "127.0.0.1"\nport = {port}\n'
        f"connect_timeout_s = {TIMEOUT_S}\n"
        for mode, port in peers.items()
    ))  # fmt: skip
    done = run_cli("hosts", "check", "--all", "-i", str(inventory), timeout=120)
    assert done.returncode == 3, done.stderr
    err = done.stderr
    assert "Traceback" not in err and "paramiko" not in err, err
    closed = (
        "the connection closed before an SSH banner (not an SSH server, or sshd turned us away)"
    )
    said = {
        "junk": closed,
        "close": closed,
        "silent": f"no SSH banner within {TIMEOUT_S} s (not an SSH server, or its sshd is stalled)",
        "refused": "Connection refused",
    }
    for mode, wording in said.items():
        lines = [line for line in err.splitlines() if line.startswith(f"{mode} connect")]
        assert len(lines) == 1 and wording in lines[0], (mode, err)
    assert "protocol banner" not in err and "No existing session" not in err, err


def test_control_paramiko_alone_prints_its_traceback(peers):
    code = (
        "import paramiko, sys\n"
        "c = paramiko.SSHClient()\n"
        "c.set_missing_host_key_policy(paramiko.AutoAddPolicy())\n"
        "try:\n"
        f"    c.connect('127.0.0.1', {peers['silent']}, username='x', timeout={TIMEOUT_S},"
        f" banner_timeout={TIMEOUT_S}, auth_timeout={TIMEOUT_S}, look_for_keys=False,"
        " allow_agent=False)\n"
        "except Exception as exc:\n"
        "    print('raised', type(exc).__name__)\n"
        "import time; time.sleep(2)\n"  # the transport thread logs after connect() gave up
    )
    started = time.monotonic()
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          cwd=REPO, timeout=60)  # fmt: skip
    assert "raised" in done.stdout and time.monotonic() - started < 30
    assert "Traceback" in done.stderr, done.stderr  # what the CLI must never show
