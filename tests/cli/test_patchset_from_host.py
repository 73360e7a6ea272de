"""`patchset new --from-host` from the command line, without sandbox hosts: how a host that
cannot be captured ends the command (one message, its exit code, nothing written).

The capture itself is proven on a real sshd host in tests/patchset/test_capture_host.py.
"""

from __future__ import annotations

import socket
import sys
from pathlib import Path

from typer.testing import CliRunner

from ddtree_deploy.cli import app

TARGET = "sglang==0.5.13.post1"  # its wheel is in the cache: fetched before the host is asked


def write_inventory(path: Path, port: int) -> Path:
    """Two hosts: `down` (SSH to a closed port) and `here` (local, whose python has no
    sglang)."""
    path.write_text(
        f'[hosts.down]\naddress = "127.0.0.1"\nport = {port}\nconnect_timeout_s = 5\n'
        f'[hosts.here]\naddress = "local"\ntransport = "local"\npython = "{sys.executable}"\n'
        f'state_dir = "{path.parent / "state"}"\n'
    )
    return path


def closed_port() -> int:
    """A loopback port nothing listens on (bound, then released)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def new(tmp_path: Path, *args: str):
    argv = ["patchset", "new", "ddtree@9.9.9", "--target", TARGET, *args]
    return CliRunner().invoke(app, [*argv, "--patchsets-dir", str(tmp_path / "ps")])


def test_a_host_without_the_package_is_bad_input(tmp_path):
    inventory = write_inventory(tmp_path / "inv.toml", closed_port())
    done = new(tmp_path, "--from-host", "here", "-i", str(inventory))
    assert done.exit_code == 2, done.output
    assert "here: sglang is not installed" in done.output
    assert not (tmp_path / "ps").exists() and not (tmp_path / "state").exists()


def test_a_host_that_is_down_needs_attention(tmp_path):
    inventory = write_inventory(tmp_path / "inv.toml", closed_port())
    done = new(tmp_path, "--from-host", "down", "-i", str(inventory))
    assert done.exit_code == 3, done.output
    assert "error: down:" in done.output and "Traceback" not in done.output
    assert not (tmp_path / "ps").exists()


def test_an_unknown_host_and_a_second_source_are_refused(tmp_path):
    inventory = write_inventory(tmp_path / "inv.toml", closed_port())
    done = new(tmp_path, "--from-host", "nosuch", "-i", str(inventory))
    assert done.exit_code == 2 and "nosuch" in done.output, done.output
    done = new(tmp_path, "--from-host", "here", "--from-tree", str(tmp_path))
    assert done.exit_code == 2, done.output
    assert "--from-tree and --from-host given" in " ".join(done.output.split())
    done = new(tmp_path, "--from-tree", str(tmp_path), "-i", str(inventory))
    assert done.exit_code == 2 and "--inventory goes with --from-host" in done.output
    assert not (tmp_path / "ps").exists()
