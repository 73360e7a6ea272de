"""Fleet fixtures: N real sshd hosts, a fast patchset, and ways to read what the CLI left."""

from __future__ import annotations

import json
import tomllib
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path

import pytest

from ddtree_deploy.events import EVENT_SCHEMA_VERSION, STAGE_ORDER, Event
from ddtree_sandbox.inventory_file import render_toml
from tests.support import make_patchset, run_cli

PATCHED = "sglang/srt/speculative/ddtree_utils.py"


@dataclass
class Fleet:
    """A sandbox of hosts plus the fast patchset and the CLI pointed at both."""

    sandbox: object
    patchsets: Path
    tmp: Path

    @property
    def hosts(self):
        return self.sandbox.hosts

    def cli(self, *args: str, **kw):
        inv = ["-i", str(self.sandbox.inventory_path)]
        return run_cli(*args, *inv, "--patchsets-dir", str(self.patchsets), **kw)

    def target_digests(self) -> dict[str, str]:
        """{path under site-packages: sha256} the patchset's lock promises after a push."""
        lock = json.loads((self.patchsets / "ddtree/1.0.0/patchset.lock.json").read_text())
        return {path: f["result_sha256"] for path, f in lock["files"].items()}

    def deployed_digests(self, host) -> dict[str, str | None]:
        """The same paths hashed on the host's disk (None: file absent)."""
        out = {}
        for path in self.target_digests():
            digest = host.tree_digest(path) if (host.site_packages_on_disk / path).exists() else {}
            out[path] = digest.get(path)
        return out

    def journal(self, host) -> list[dict]:
        path = host.state_dir_on_disk / "journal.jsonl"
        if not path.exists():
            return []
        return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]

    def break_new_version_start(self, name: str) -> None:
        """Make this host's service refuse to start while the patch is installed: restart fails
        after install, and starts again once rollback removed the patch's new file."""
        data = tomllib.loads(self.sandbox.inventory_path.read_text())
        site = "/srv/venv/lib/python3.11/site-packages"
        start = data["defaults"]["service"]["start"]
        script = f"test -e {site}/{PATCHED} && exit 1; exec {start}"
        data["hosts"][name]["service"]["start"] = f"/bin/sh -c '{script}'"
        self.sandbox.inventory_path.write_text(render_toml(data))


@pytest.fixture
def fleet_factory(sandbox_factory, tmp_path):
    """fleet_factory(count) -> Fleet with `count` fresh hosts (faster polling of health)."""
    patchsets = make_patchset(tmp_path / "fast")

    def make(count: int) -> Fleet:
        sandbox = sandbox_factory(count)
        for host in sandbox.hosts:  # orchestration, not sglang: ~5 s less per stub start
            host.write_stub_config(imports="patched")
        data = tomllib.loads(sandbox.inventory_path.read_text())
        data["defaults"]["service"]["poll_interval_s"] = 0.2
        sandbox.inventory_path.write_text(render_toml(data))
        return Fleet(sandbox, patchsets, tmp_path)

    return make


def parse_events(stdout: str) -> list[Event]:
    """Every stdout line must be one Event of the documented schema version."""
    events = [Event.model_validate_json(line) for line in stdout.splitlines()]
    for e in events:
        assert e.schema_version == EVENT_SCHEMA_VERSION
        assert e.stage in STAGE_ORDER, e.stage
    return events


def summaries(events: list[Event]) -> dict[str, Event]:
    """host -> its one summary event (asserts there is exactly one per host)."""
    out: dict[str, Event] = {}
    for e in events:
        if e.stage == "summary":
            assert e.host not in out, f"two summaries for {e.host}"
            out[e.host] = e
    return out


def check_junit(path: Path, events: list[Event]) -> ET.Element:
    """The JUnit file parses and has one testcase per finished host x stage event (plus one
    `smoke.<suite>` case per suite a host ran)."""
    suite = ET.parse(path).getroot()
    finished = [e for e in events if e.event in ("ok", "fail", "skip")]
    cases = suite.findall("testcase")
    stage_cases = [c for c in cases if not c.get("name").startswith("smoke.")]
    assert int(suite.get("tests")) == len(cases)
    assert len(stage_cases) == len(finished)
    assert int(suite.get("failures")) == len(suite.findall("testcase/failure"))
    assert sum(c.find("failure") is not None for c in stage_cases) == sum(
        e.event == "fail" for e in finished
    )
    assert sum(c.find("skipped") is not None for c in stage_cases) == sum(
        e.event == "skip" for e in finished
    )
    assert sorted((c.get("classname"), c.get("name")) for c in stage_cases) == sorted(
        (e.host, e.stage) for e in finished
    )
    return suite
