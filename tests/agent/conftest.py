"""A host in a temp dir, no root: a site-packages holding a fake installed distribution
(`fakepkg` 1.0, *.dist-info with METADATA and RECORD) and a state dir; and a
LocalTransport that runs the REAL agent bundle on it with a bare `python -c` bootstrap."""

from __future__ import annotations

import base64
import glob
import hashlib
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from ddtree_deploy.agent import AgentRequest, AgentResponse, Op
from ddtree_deploy.inventory import parse_inventory
from ddtree_deploy.transport import LocalTransport

PACKAGE, VERSION = "fakepkg", "1.0"
MODULE = "fakepkg/mod.py"
MODULE_TEXT = "def answer():\n    return 41\n"
PATCH = (
    "--- a/fakepkg/mod.py\n+++ b/fakepkg/mod.py\n@@ -1,2 +1,2 @@\n def answer():\n"
    "-    return 41\n+    return 42\n"
)
PATCHED_TEXT = "def answer():\n    return 42\n"
NEW_FILE = "fakepkg/extra.py"
NEW_TEXT = "EXTRA = True\n"


def sha(text: str | bytes) -> str:
    """sha256 hex of text (utf-8) or bytes."""
    return hashlib.sha256(text.encode() if isinstance(text, str) else text).hexdigest()


def b64(text: str) -> str:
    """base64 of text (utf-8), as the install op carries new files."""
    return base64.b64encode(text.encode()).decode()


def make_site(site: Path) -> None:
    """Write fakepkg 1.0 into `site` with a RECORD (what pip leaves behind)."""
    (site / PACKAGE).mkdir(parents=True)
    (site / PACKAGE / "__init__.py").write_text("")
    (site / MODULE).write_text(MODULE_TEXT)
    info = site / f"{PACKAGE}-{VERSION}.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {PACKAGE}\nVersion: {VERSION}\n")
    digest = base64.urlsafe_b64encode(hashlib.sha256(MODULE_TEXT.encode()).digest())
    record = f"{MODULE},sha256={digest.decode().rstrip('=')},{len(MODULE_TEXT)}\n"
    (info / "RECORD").write_text(record + f"{PACKAGE}/__init__.py,,\n")


@dataclass
class FakeHost:
    """Paths of the temp host and a transport to its agent."""

    site: Path
    state: Path
    transport: LocalTransport

    def call(self, *ops: tuple[str, dict]) -> AgentResponse:
        """One request of (op, args) pairs; the typed answer."""
        request = AgentRequest(
            state_dir=str(self.state), ops=[Op(op=name, args=args) for name, args in ops]
        )
        return self.transport.call(request)

    def call_ops(self, *ops: Op) -> AgentResponse:
        """One request of built ops (e.g. from stages/op_builders.py)."""
        return self.transport.call(AgentRequest(state_dir=str(self.state), ops=list(ops)))


def oldest_python() -> str | None:
    """A python 3.8 (the oldest host python the agent supports) if this machine has one."""
    candidates = sorted(glob.glob(os.path.expanduser("~/.pyenv/versions/3.8*/bin/python3.8")))
    candidates.append(shutil.which("python3.8") or "")
    for python in filter(None, candidates):
        done = subprocess.run([python, "-c", "import sys; print(sys.version_info[:2])"],
                              capture_output=True, text=True)  # fmt: skip
        if done.stdout.strip() == "(3, 8)":  # not a pyenv shim that says "not found"
            return python
    return None


def start_fake_host(tmp_path: Path, monkeypatch, python: str) -> Iterator[FakeHost]:
    """A temp host whose agent (run by `python`) sees only the fake site-packages."""
    site, state = tmp_path / "site", tmp_path / "state"
    make_site(site)
    monkeypatch.setenv("PYTHONPATH", str(site))  # inherited by the agent process only
    raw = {"hosts": {"x": {"address": "local", "transport": "local",
                           "python": python, "state_dir": str(state)}}}  # fmt: skip
    host = parse_inventory(raw, "mem").hosts["x"]
    with LocalTransport(host) as transport:
        yield FakeHost(site=site, state=state, transport=transport)


@pytest.fixture
def fake_host(tmp_path, monkeypatch) -> Iterator[FakeHost]:
    """A temp host whose agent runs on this python."""
    yield from start_fake_host(tmp_path, monkeypatch, sys.executable)


@pytest.fixture
def oldest_host(tmp_path, monkeypatch) -> Iterator[FakeHost]:
    """A temp host whose agent runs on python 3.8; skipped where there is none."""
    python = oldest_python()
    if python is None:
        pytest.skip("no python3.8 here (PATH or ~/.pyenv)")
    yield from start_fake_host(tmp_path, monkeypatch, python)
