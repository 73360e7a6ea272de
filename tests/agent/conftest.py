"""A host in a temp dir, no root: a site-packages holding a fake installed distribution
(`fakepkg` 1.0, *.dist-info with METADATA and RECORD) and a state dir; and a
LocalTransport that runs the REAL agent bundle on it with a bare `python -c` bootstrap."""

from __future__ import annotations

import base64
import hashlib
import sys
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
        """One request of built ops (e.g. from stages/requests.py)."""
        return self.transport.call(AgentRequest(state_dir=str(self.state), ops=list(ops)))


@pytest.fixture
def fake_host(tmp_path, monkeypatch) -> FakeHost:
    """A temp host whose agent python sees only the fake site-packages (not this tree)."""
    site, state = tmp_path / "site", tmp_path / "state"
    make_site(site)
    monkeypatch.setenv("PYTHONPATH", str(site))  # inherited by the agent process only
    raw = {"hosts": {"x": {"address": "local", "transport": "local",
                           "python": sys.executable, "state_dir": str(state)}}}  # fmt: skip
    host = parse_inventory(raw, "mem").hosts["x"]
    with LocalTransport(host) as transport:
        yield FakeHost(site=site, state=state, transport=transport)
