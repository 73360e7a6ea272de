"""A host whose sglang is an editable install (the official image's layout): planned,
pushed, smoke-tested and rolled back byte-identical, on a real sshd host.

The host's sglang is a REAL `pip install -e /sgl-workspace/sglang/python` made by pip
(ddtree_sandbox/editable.py): site-packages holds only the dist-info, a .pth and setuptools'
finder; the files live in the source tree. The agent finds them through the import spec,
not the dist's location (where every base file would look absent, i.e. drifted: exit 2).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from ddtree_sandbox import DEFAULT_SGLANG_VERSION, Sandbox, SandboxHost, start_sandbox
from ddtree_sandbox.editable import bind_workspace, make_editable, source_path
from tests.support import make_patchset, run_cli

pytestmark = pytest.mark.hosts
CHANGED = {
    "srt/speculative/spec_info.py",
    "srt/server_args.py",
    "srt/speculative/ddtree_utils.py",
}


@dataclass
class Editable:
    """The module's one editable host, its source tree on disk and the CLI aimed at it."""

    sandbox: Sandbox
    source: Path
    patchsets: Path

    @property
    def host(self) -> SandboxHost:
        return self.sandbox.hosts[0]

    def cli(self, *args: str):
        extra = ["-i", str(self.sandbox.inventory_path)]
        if args[0] in ("push", "plan", "smoke", "status"):
            extra += ["--patchsets-dir", str(self.patchsets)]
        return run_cli(*args, *extra)

    def source_digest(self) -> dict[str, str]:
        return self.host.tree_digest(root=self.source)

    def site_listing(self) -> list[str]:
        return sorted(p.name for p in self.host.site_packages_on_disk.iterdir())


@pytest.fixture(scope="module")
def editable(base_env, tmp_path_factory) -> Iterator[Editable]:
    workdir = tmp_path_factory.mktemp("editable")
    sandbox = start_sandbox(
        workdir / "sandbox", 1, first_octet=None, base_env=base_env, service="stub",
        customize=bind_workspace,
    )  # fmt: skip
    try:
        source = make_editable(sandbox.hosts[0], DEFAULT_SGLANG_VERSION)
        patchsets = make_patchset(workdir / "fast", after_restart=["server"])
        yield Editable(sandbox, source, patchsets)
    finally:
        sandbox.stop()


def events(stdout: str) -> list[dict]:
    return [json.loads(line) for line in stdout.splitlines() if line.strip()]


def test_the_fixture_is_a_real_pip_editable_install(editable):
    """site-packages has no sglang files, pip's direct_url says editable, and the host's
    python imports sglang from /sgl-workspace."""
    listing = editable.site_listing()
    assert "sglang" not in listing and any(n.startswith("__editable__") for n in listing)
    (info,) = editable.host.site_packages_on_disk.glob("sglang-*.dist-info")
    assert json.loads((info / "direct_url.json").read_text())["dir_info"] == {"editable": True}
    probe = "import importlib.util as u; print(u.find_spec('sglang').origin)"
    where = editable.host.run([editable.host.python, "-c", probe])
    assert where.stdout.strip() == f"{source_path(editable.host)}/sglang/__init__.py"


def test_hosts_check_and_plan_report_the_editable_install(editable):
    check = editable.cli("hosts", "check", "-H", "host0", "--json")
    assert check.returncode == 0, check.stderr
    assert f"(editable install at {source_path(editable.host)})" in check.stdout
    assert "no RECORD (editable)" in check.stderr  # the facts table
    plan = editable.cli("plan", "-H", "host0", "-p", "ddtree@1.0.0", "--json")
    assert plan.returncode == 0, plan.stderr
    assert f"3 file(s) would change (editable install at {source_path(editable.host)})" in (
        plan.stdout
    )
    assert f"editable: {source_path(editable.host)}" in plan.stderr  # the plan table


def test_push_smoke_rollback_round_trip_is_byte_identical(editable):
    before, site_before = editable.source_digest(), editable.site_listing()
    push = editable.cli("push", "-H", "host0", "-p", "ddtree@1.0.0", "--json")
    assert push.returncode == 0, push.stderr
    after = editable.source_digest()
    assert {p for p in after if before.get(p) != after[p]} == CHANGED
    assert editable.site_listing() == site_before  # nothing landed in site-packages
    server_log = (editable.host.service_dir_on_disk / "server.log").read_text()
    imported = f"imported sglang {DEFAULT_SGLANG_VERSION} from {source_path(editable.host)}/"
    assert imported in server_log.rsplit("stub server starting", 1)[-1]  # the restarted one
    passed = [
        e["data"]["suite"] for e in events(push.stdout) if (e.get("data") or {}).get("passed")
    ]
    assert {"integrity", "compile", "server"} <= set(passed), passed

    smoke = editable.cli("smoke", "-H", "host0", "-p", "ddtree@1.0.0", "--json")
    assert smoke.returncode == 0, smoke.stderr

    back = editable.cli("rollback", "-H", "host0")
    assert back.returncode == 0, back.stderr
    assert editable.source_digest() == before
    assert editable.site_listing() == site_before
