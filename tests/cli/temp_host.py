"""A host in a temp dir for CLI tests, no sshd: the REAL agent bundle runs through the
local transport (tests/agent/conftest.py's fake host: fakepkg's site-packages and a state
dir), named `x` by an inventory of its own. The `temp_host` fixture (tests/cli/conftest.py)
adds an empty sglang distribution: a real restore checks that the inventory's package
(sglang) is imported from the backup's site-packages."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from ddtree_deploy.cli import app
from tests.agent.conftest import FakeHost, start_fake_host


def start_temp_host(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeHost]:
    """The temp host (see module), stopped when the generator ends."""
    for fake in start_fake_host(tmp_path, monkeypatch, sys.executable):
        (fake.site / "sglang").mkdir()
        (fake.site / "sglang" / "__init__.py").write_text("")
        info = fake.site / "sglang-0.0.1.dist-info"
        info.mkdir()
        (info / "METADATA").write_text("Metadata-Version: 2.1\nName: sglang\nVersion: 0.0.1\n")
        (info / "RECORD").write_text("sglang/__init__.py,,\n")
        yield fake


def inventory(host: FakeHost, tmp_path: Path) -> Path:
    """An inventory naming the temp host `x` (local transport, the agent on this python)."""
    path = tmp_path / "inventory.toml"
    path.write_text(
        "[hosts.x]\n"
        'address = "local"\n'
        'transport = "local"\n'
        f"python = {json.dumps(sys.executable)}\n"
        f"state_dir = {json.dumps(str(host.state))}\n"
        '[hosts.x.service]\nkind = "none"\n'
    )
    return path


def cli(inv: Path, *args: str, stdin: str | None = None) -> tuple[int, str, str]:
    """`ddtree-deploy ARGS -i INV -H x` in-process; (exit code, stdout, stderr)."""
    done = CliRunner().invoke(app, [*args, "-i", str(inv), "-H", "x"], input=stdin)
    return done.exit_code, done.stdout, done.stderr


def state_of(host: FakeHost) -> dict[str, str]:
    """Every file of the host's state dir and site-packages, with its bytes (a snapshot)."""
    found = {}
    for root in (host.state, host.site):
        for path in sorted(root.rglob("*")):
            if path.is_file():
                found[str(path)] = path.read_bytes().hex()
    return found
