"""A ported patchset pushes to a real sshd host running the sglang it was ported to.

ddtree 1.0.0 (sglang 0.5.13.post1) is ported to sglang 0.5.13 and pushed with every suite of
its own (integrity, compile, imports, ddtree, gpu; `server` after the restart) to one host
whose venv holds the real sglang 0.5.13; the unported 1.0.0 is refused there.
"""

from __future__ import annotations

import hashlib
import json
import time

import pytest

from ddtree_deploy.patchset import load_patchset
from tests.support import DDTREE_100, copy_patchset, run_cli

pytestmark = pytest.mark.hosts
TARGET = "0.5.13"
PORTED = "1.0.0+sglang0.5.13"


def verdict(suite: dict) -> str:
    return "skipped" if suite.get("skipped") else "passed" if suite.get("passed") else "FAILED"


def test_ported_patchset_pushes_to_a_host_with_that_sglang(sandbox_factory, tmp_path):
    patchsets = tmp_path / "patchsets"
    copy_patchset(DDTREE_100, patchsets / "ddtree" / "1.0.0")
    marks = [("", time.monotonic())]
    ported = run_cli(
        "patchset", "port", "ddtree@1.0.0", "--to", f"sglang=={TARGET}",
        "--patchsets-dir", str(patchsets),
    )  # fmt: skip
    assert ported.returncode == 0, ported.stderr[-3000:]
    marks.append(("port", time.monotonic()))
    sandbox = sandbox_factory(1, sglang_version=TARGET, names=["port0"])
    host = sandbox.hosts[0]
    version = host.run([host.python, "-c", "import sglang; print(sglang.__version__)"])
    assert version.stdout.strip() == TARGET, version.stderr[-2000:]
    inventory = str(sandbox.inventory_path)
    common = ("-i", inventory, "--all", "--patchsets-dir", str(patchsets), "--json")

    marks.append(("start host", time.monotonic()))
    refused = run_cli("push", *common, "-p", "ddtree@1.0.0")  # the control: not ported
    assert refused.returncode == 2, refused.stderr[-3000:]
    assert "0.5.13.post1" in refused.stderr

    marks.append(("refused push", time.monotonic()))
    done = run_cli("push", *common, "-p", f"ddtree@{PORTED}")
    marks.append(("push", time.monotonic()))
    assert done.returncode == 0, done.stderr[-4000:]
    events = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    suites = {
        e["data"]["suite"]: verdict(e["data"])
        for e in events
        if e["stage"] in ("smoke", "verify") and e["event"] == "info" and "suite" in e["data"]
    }
    wanted = load_patchset(patchsets / "ddtree" / PORTED).spec.smoke
    green = {s: "skipped" if s == "gpu" else "passed" for s in wanted.suites}  # a CPU host
    assert suites == {**green, **{s: "passed" for s in wanted.after_restart}}
    lock = load_patchset(patchsets / "ddtree" / PORTED).require_lock()
    for rel, locked in lock.files.items():
        on_disk = (host.site_packages_on_disk / rel).read_bytes()
        assert hashlib.sha256(on_disk).hexdigest() == locked.result_sha256, rel
    steps = [f"{name} {t - marks[i][1]:.1f} s" for i, (name, t) in enumerate(marks[1:])]
    steps.append(f"total {marks[-1][1] - marks[0][1]:.1f} s")
    steps += [f"{e['stage']} {e['duration_s']:.1f} s" for e in events if e.get("duration_s")]
    steps += [
        f"suite {e['data']['suite']} {e['data'].get('duration_s', 0):.1f} s"
        for e in events
        if e["event"] == "info" and "suite" in e["data"]
    ]
    print("\n" + ", ".join(steps))
