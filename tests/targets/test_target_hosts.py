"""ddtree 2.0.0 on real sglang 0.5.23 hosts, and one `-p ddtree` push to a mixed fleet.

Host tests: real sshd sandbox hosts, each with its own real sglang (0.5.13.post1 or 0.5.23).
"""

from __future__ import annotations

import hashlib
import json
import time
import tomllib
from pathlib import Path

import pytest

from ddtree_deploy.patchset import load_patchset
from ddtree_sandbox.inventory_file import render_toml
from tests.support import REPO, copy_patchset, run_cli

pytestmark = pytest.mark.hosts
DDTREE = REPO / "patchsets" / "ddtree"
V0523 = "0.5.23"

# Run by the host's python after the push: --speculative-ddtree-budget through the real
# 0.5.23 arg group (CLI parser + the speculative hook) and the registry's answers.
BUDGET_PROBE = r"""
import argparse, json
from sglang.srt.server_args import ServerArgs
from sglang.srt.arg_groups.speculative_hook import _handle_ddtree
from sglang.srt.speculative.spec_info import SpeculativeAlgorithm
out = {}
parser = argparse.ArgumentParser()
ServerArgs.add_cli_args(parser)
out["cli"] = parser.parse_args(["--model-path", "m", "--speculative-ddtree-budget", "7"]
                               ).speculative_ddtree_budget
cases = {"ddtree_unset": dict(speculative_algorithm="DDTREE"),
         "ddtree_zero": dict(speculative_algorithm="DDTREE", speculative_ddtree_budget=0),
         "dflash_set": dict(speculative_algorithm="DFLASH", speculative_ddtree_budget=4),
         "none_set": dict(speculative_ddtree_budget=4),
         "none_unset": {}}
for name, kw in cases.items():
    try:
        _handle_ddtree(ServerArgs(model_path="m", **kw))
        out[name] = "ok"
    except ValueError as exc:
        out[name] = str(exc)
algo = SpeculativeAlgorithm.from_string("DDTREE")
worker = algo.create_worker(ServerArgs(model_path="m"))
out["algo"] = [repr(algo), algo.is_ddtree(), algo.is_dflash(), algo.is_dflash_family(),
               SpeculativeAlgorithm.DFLASH.is_ddtree(), worker.__name__]
print(json.dumps(out))
"""


def lock_results(version: str, base: Path = DDTREE) -> dict[str, str]:
    lock = load_patchset(base / version).lock
    return {path: f.result_sha256 for path, f in lock.files.items()}


def on_host(host, paths) -> dict[str, str | None]:
    """sha256 of each site-packages path on the host's disk (None: missing)."""
    out = {}
    for rel in paths:
        full = host.site_packages_on_disk / rel
        out[rel] = hashlib.sha256(full.read_bytes()).hexdigest() if full.is_file() else None
    return out


def events_of(stdout: str) -> list[dict]:
    return [json.loads(line) for line in stdout.splitlines() if line.startswith("{")]


def summaries(events: list[dict]) -> dict[str, dict]:
    return {e["host"]: e for e in events if e["stage"] == "summary"}


# make test-serving (CI time: 64 s): 2.1.0 supersedes 2.0.0 on 0.5.23 and tests/serving_v2
# pushes it to real 0.5.23 servers with every suite in make test
@pytest.mark.serving_full
def test_push_ddtree_200_to_real_sglang_0523(sandbox_factory):
    sandbox = sandbox_factory(1, sglang_version=V0523, names=["new0"])
    host = sandbox.hosts[0]
    version = host.run([host.python, "-c", "import sglang; print(sglang.__version__)"])
    assert version.stdout.strip() == V0523, version.stderr[-2000:]
    inventory = str(sandbox.inventory_path)
    started = time.monotonic()
    done = run_cli("push", "-i", inventory, "--all", "-p", "ddtree@2.0.0", "--json")
    push_s = time.monotonic() - started
    assert done.returncode == 0, done.stderr[-4000:]
    wanted = lock_results("2.0.0")
    assert on_host(host, wanted) == wanted
    events = events_of(done.stdout)
    oks = {e["stage"] for e in events if e["event"] == "ok"}
    assert {"smoke", "restart", "health", "verify", "commit"} <= oks
    print(f"\npush ddtree@2.0.0 to one sglang 0.5.23 host, all suites: {push_s:.1f} s")

    suites = {  # the push's own smoke stage reports each suite
        e["data"]["suite"]: e["data"]
        for e in events
        if e["stage"] == "smoke" and e["event"] == "info"
    }
    assert suites["imports"]["passed"] and suites["ddtree"]["passed"]
    checks = {c["name"]: c for c in suites["ddtree"]["checks"]}
    assert checks["seed"]["passed"] and checks["seed"]["detail"].startswith(
        "parents=[-1, 0, 1, 0, 3] walk=([0, 1], 777)"
    )
    assert checks["registration"]["passed"], checks["registration"]
    assert "CustomSpecAlgo('DDTREE')" in checks["registration"]["detail"]
    assert checks["worker_class"] == {
        "name": "worker_class",
        "passed": True,
        "detail": "sglang.srt.speculative.dflash_worker_v2.DFlashWorkerV2",
    }

    probe = host.run([host.python, "-W", "ignore", "-c", BUDGET_PROBE], timeout_s=600)
    assert probe.returncode == 0, probe.stderr[-3000:]
    out = json.loads(probe.stdout.strip().splitlines()[-1])
    assert out["cli"] == 7
    assert out["ddtree_unset"] == (
        "DDTREE speculative decoding requires setting --speculative-ddtree-budget."
    )
    assert out["ddtree_zero"] == "--speculative-ddtree-budget must be >= 1, got 0."
    assert "only valid with --speculative-algorithm DDTREE" in out["dflash_set"]
    assert "got speculative_algorithm=None" in out["none_set"]
    assert out["none_unset"] == "ok"
    assert out["algo"] == ["CustomSpecAlgo('DDTREE')", True, True, True, False, "DFlashWorkerV2"]


def merge_inventories(paths: list[Path], out: Path) -> Path:
    """One inventory of several sandboxes: each host carries its sandbox's defaults."""
    hosts = {}
    for path in paths:
        data = tomllib.loads(path.read_text())
        defaults = data.get("defaults", {})
        for name, table in data["hosts"].items():
            merged = {**defaults, **table}
            merged["service"] = {**defaults.get("service", {}), **table.get("service", {})}
            hosts[name] = merged
    out.write_text(render_toml({"hosts": hosts}))
    return out


def fast_copies(root: Path, *versions: str) -> Path:
    """Copies of the real locked versions with integrity+compile smoke only, re-locked (the
    lock pins [smoke]; a copy never pushed may be, as `patchset lock --force` does)."""
    from ddtree_deploy.patchset import load_patchset, write_lock

    for version in versions:
        dest = root / "patchsets" / "ddtree" / version
        copy_patchset(DDTREE / version, dest)  # shared files stay shared: blobs copied
        spec = dest / "patchset.toml"
        head = spec.read_text().split("[smoke]")[0]
        spec.write_text(f'{head}[smoke]\nsuites = ["integrity", "compile"]\nafter_restart = []\n')
        write_lock(load_patchset(dest), replace=True)
    return root / "patchsets"


def pretend_version(host, version: str) -> None:
    """Make the host report another sglang version (its dist-info METADATA only)."""
    (meta,) = host.site_packages_on_disk.glob("sglang-*.dist-info/METADATA")
    text = meta.read_text()
    old = next(line for line in text.splitlines() if line.startswith("Version: "))
    meta.write_text(text.replace(old, f"Version: {version}", 1))


def test_mixed_fleet_one_push_each_host_gets_its_version(sandbox_factory, tmp_path):
    old = sandbox_factory(3, names=["old0", "old1", "odd"])
    new = sandbox_factory(1, sglang_version=V0523, names=["new0"])
    pretend_version(old.host("odd"), "0.5.9")
    inventory = str(merge_inventories([old.inventory_path, new.inventory_path], tmp_path / "i"))
    base = fast_copies(tmp_path, "1.0.0", "2.0.0")
    odd_before = old.host("odd").tree_digest()

    def cli(*args: str):
        return run_cli(*args, "-i", inventory, "--all", "--patchsets-dir", str(base), "--json")

    started = time.monotonic()
    done = cli("push", "-p", "ddtree")
    push_s = time.monotonic() - started
    assert done.returncode == 0, done.stderr[-4000:]
    events = events_of(done.stdout)
    picks = {
        e["host"]: e["data"]["patchset"]
        for e in events
        if e["stage"] == "connect" and e["event"] == "info"
    }
    assert picks == {"old0": "ddtree@1.0.0", "old1": "ddtree@1.0.0", "odd": None,
                     "new0": "ddtree@2.0.0"}  # fmt: skip
    ends = summaries(events)
    assert {h: e["data"]["outcome"] for h, e in ends.items()} == {
        "old0": "ok", "old1": "ok", "odd": "not_started", "new0": "ok",
    }  # fmt: skip
    assert ends["new0"]["data"]["version_now"] == "ddtree@2.0.0"
    assert ends["odd"]["message"] == (
        "sglang 0.5.9: no version of ddtree targets it (have ddtree@1.0.0 for sglang "
        "0.5.13.post1, ddtree@2.0.0 for sglang 0.5.23)"
    )
    v1, v2 = lock_results("1.0.0", base / "ddtree"), lock_results("2.0.0", base / "ddtree")
    assert on_host(old.host("old0"), v1) == v1 and on_host(old.host("old1"), v1) == v1
    assert on_host(new.host("new0"), v2) == v2
    assert old.host("odd").tree_digest() == odd_before
    print(f"\nmixed push -p ddtree (2x 0.5.13.post1, 1x 0.5.23, 1 skipped): {push_s:.1f} s")

    strict = cli("push", "-p", "ddtree", "--strict")
    assert strict.returncode == 2, strict.stderr[-3000:]
    ends = summaries(events_of(strict.stdout))
    assert {h: e["data"]["outcome"] for h, e in ends.items()} == {
        "old0": "no_changes", "old1": "no_changes", "odd": "refused", "new0": "no_changes",
    }  # fmt: skip

    status = cli("status", "-p", "ddtree")
    assert status.returncode == 0, status.stderr[-3000:]
    ends = summaries(events_of(status.stdout))
    assert ends["old0"]["message"] == "at ddtree@1.0.0"
    assert ends["new0"]["message"] == "at ddtree@2.0.0"
    assert ends["odd"]["message"].startswith("deployed: nothing; sglang 0.5.9: no version")

    plan = cli("plan", "-p", "ddtree")
    assert plan.returncode == 0, plan.stderr[-3000:]
    assert {h: e["data"]["outcome"] for h, e in summaries(events_of(plan.stdout)).items()} == {
        "old0": "no_changes", "old1": "no_changes", "odd": "not_started", "new0": "no_changes",
    }  # fmt: skip

    pinned = run_cli(
        "push", "-i", inventory, "-H", "new0", "--patchsets-dir", str(base),
        "-p", "ddtree@1.0.0", "--json",
    )  # fmt: skip
    assert pinned.returncode == 2
    (end,) = summaries(events_of(pinned.stdout)).values()
    assert end["data"]["outcome"] == "refused" and "0.5.23" in end["message"]
    assert not [e for e in events_of(pinned.stdout) if e["stage"] == "connect"]
