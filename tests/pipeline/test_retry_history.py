"""push --retry and history against two real sshd hosts and real sglang files: a push whose
second host refused (a hand-edited base file), its --json file, a retry that pushes only
that host once the file is put back, and the history the journals then tell."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.support import make_patchset, run_cli

pytestmark = pytest.mark.hosts
EDITED = "sglang/srt/server_args.py"


@dataclass
class Fleet:
    sandbox: object
    patchsets: Path

    def cli(self, *args: str):
        return run_cli(
            *args, "-i", str(self.sandbox.inventory_path), "--patchsets-dir", str(self.patchsets)
        )

    def history(self, *args: str):
        """`history` reads journals only: no patchsets to give it."""
        return run_cli("history", *args, "-i", str(self.sandbox.inventory_path))

    def journal(self, index: int) -> list[dict]:
        path = self.sandbox.hosts[index].state_dir_on_disk / "journal.jsonl"
        if not path.exists():
            return []
        return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


@pytest.fixture
def fleet(sandbox_factory, tmp_path) -> Fleet:
    return Fleet(sandbox_factory(2), make_patchset(tmp_path / "fast"))


def test_retry_pushes_only_the_host_that_failed_then_history_tells_it(fleet, tmp_path):
    target = fleet.sandbox.hosts[1].site_packages_on_disk / EDITED
    original = target.read_text()
    target.write_text(original + "\n# local hotfix\n")
    first = fleet.cli("push", "--all", "--json")
    assert first.returncode == 2, first.stderr  # host1 refused, host0 deployed
    events = tmp_path / "push.jsonl"
    events.write_text(first.stdout)
    assert [e["state"] for e in fleet.journal(0)] == ["installing", "committed"]
    assert fleet.journal(1) == []

    target.write_text(original)
    retry = fleet.cli("push", "--retry", str(events), "--json")
    assert retry.returncode == 0, retry.stderr
    assert "retrying 1: host1 (refused)" in " ".join(retry.stderr.split())
    summaries = [json.loads(x) for x in retry.stdout.splitlines() if '"summary"' in x]
    assert [(s["host"], s["data"]["outcome"]) for s in summaries] == [("host1", "ok")]
    assert [e["state"] for e in fleet.journal(0)] == ["installing", "committed"]  # untouched
    assert [e["state"] for e in fleet.journal(1)] == ["installing", "committed"]

    again = tmp_path / "retry.jsonl"
    again.write_text(retry.stdout)
    nothing = fleet.cli("push", "--retry", str(again))
    assert nothing.returncode == 0 and "nothing to retry" in nothing.stderr

    history = fleet.history("--all", "--json")
    assert history.returncode == 0, history.stderr
    deploys = [
        (e["host"], e["data"]["deploy"])
        for e in map(json.loads, history.stdout.splitlines())
        if e["stage"] == "history" and e["event"] == "info"
    ]
    # --json streams each host's events as that host answers (hosts run in parallel):
    # the order across hosts is the table's job, so compare in start order.
    deploys.sort(key=lambda hd: hd[1]["started"])
    assert [(host, d["outcome"]) for host, d in deploys] == [
        ("host0", "committed"),
        ("host1", "committed"),
    ]
    assert all(d["holder"] and d["patchset"] == "ddtree@1.0.0" for _, d in deploys)
    table = fleet.history("--all")
    assert table.returncode == 0 and table.stdout.count("committed") == 2


def test_retry_of_hosts_gone_from_the_inventory_changes_nothing(fleet, tmp_path):
    first = fleet.cli("push", "-H", "host0", "--json")
    assert first.returncode == 0, first.stderr
    events = tmp_path / "push.jsonl"
    events.write_text(first.stdout.replace('"host0"', '"retired0"'))
    lines = [json.loads(x) for x in events.read_text().splitlines()]
    summary = next(x for x in lines if x["stage"] == "summary")
    summary["data"]["outcome"] = "rolled_back"
    events.write_text("\n".join(json.dumps(x) for x in [*lines, summary]) + "\n")
    done = fleet.cli("push", "--retry", str(events))
    assert done.returncode == 2 and "retired0" in done.stderr
    assert [e["state"] for e in fleet.journal(0)] == ["installing", "committed"]
