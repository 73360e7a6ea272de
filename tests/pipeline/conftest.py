"""A one-host sandbox plus a fast patchset variant, shared by the pipeline tests."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.support import make_patchset, run_cli


@dataclass
class Deploy:
    """One sandbox host and the CLI pointed at it."""

    sandbox: object
    patchsets: Path

    @property
    def host(self):
        return self.sandbox.hosts[0]

    def cli(self, *args: str, patchsets: Path | None = None, **kw):
        extra = ["-i", str(self.sandbox.inventory_path)]
        if args and args[0] in ("push", "plan", "smoke", "status"):
            extra += ["--patchsets-dir", str(patchsets or self.patchsets)]
        return run_cli(*args, *extra, **kw)

    def journal(self) -> list[dict]:
        path = self.host.state_dir_on_disk / "journal.jsonl"
        if not path.exists():
            return []
        return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]

    def lock_file(self) -> Path:
        return self.host.state_dir_on_disk / "lock"


@pytest.fixture
def deploy(sandbox_factory, tmp_path) -> Deploy:
    sandbox = sandbox_factory(1)
    return Deploy(sandbox=sandbox, patchsets=make_patchset(tmp_path / "fast"))
