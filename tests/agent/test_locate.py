"""The agent finds the package where Python imports it from (its import spec), on temp hosts
run by the REAL bundle: a wheel layout, an editable layout (dist-info with PEP 610's
direct_url.json in site-packages, the files in a source tree), and a copy that shadows the
installed one (refused: package_not_found, before anything changes)."""

from __future__ import annotations

import json
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from ddtree_deploy.agent.host.wire import Code
from ddtree_deploy.agent.host.wire_results import Facts
from ddtree_deploy.inventory import parse_inventory
from ddtree_deploy.stages import op_builders as ops
from ddtree_deploy.transport import LocalTransport
from tests.agent.conftest import (
    MODULE,
    MODULE_TEXT,
    PACKAGE,
    PATCHED_TEXT,
    FakeHost,
    make_site,
    oldest_python,
    sha,
)
from tests.agent.test_ops_bundle import preflight, prepared


def make_editable(root: Path) -> tuple[Path, Path]:
    """fakepkg 1.0 installed editable: return (site-packages, source tree). The dist-info
    keeps pip's RECORD of only its own files and says `editable` in direct_url.json."""
    site, source = root / "site", root / "src" / "python"
    make_site(site)
    source.mkdir(parents=True)
    shutil.move(site / PACKAGE, source / PACKAGE)
    info = next(site.glob("*.dist-info"))
    (info / "RECORD").write_text(f"{info.name}/METADATA,,\n")
    direct = {"dir_info": {"editable": True}, "url": f"file://{root / 'src'}"}
    (info / "direct_url.json").write_text(json.dumps(direct))
    return site, source


def host_on(tmp_path: Path, monkeypatch, python: str, *path: Path) -> Iterator[FakeHost]:
    """A temp host whose agent sees `path` (first wins) as its extra sys.path, as a static
    editable .pth or a PYTHONPATH would put them there."""
    monkeypatch.setenv("PYTHONPATH", ":".join(map(str, path)))
    raw = {"hosts": {"x": {"address": "local", "transport": "local", "python": python,
                           "state_dir": str(tmp_path / "state")}}}  # fmt: skip
    with LocalTransport(parse_inventory(raw, "mem").hosts["x"]) as transport:
        yield FakeHost(site=path[0], state=tmp_path / "state", transport=transport)


@pytest.fixture
def editable(tmp_path, monkeypatch) -> Iterator[tuple[FakeHost, Path, Path]]:
    site, source = make_editable(tmp_path)
    for host in host_on(tmp_path, monkeypatch, sys.executable, site, source):
        yield host, site, source


def test_a_wheel_is_patched_in_site_packages(fake_host):
    facts = fake_host.call(("facts", {"package": PACKAGE, "paths": [MODULE]})).facts()
    assert isinstance(facts, Facts)
    assert (facts.install_kind, facts.package_root) == ("wheel", str(fake_host.site))
    assert facts.locate_error is None


def test_an_editable_install_is_hashed_and_patched_in_its_source_tree(editable):
    host, site_packages, source = editable
    facts = host.call(("facts", {"package": PACKAGE, "paths": [MODULE]})).facts()
    assert isinstance(facts, Facts)
    assert facts.install_kind == "editable"
    assert facts.package_root == str(source) and facts.site_packages == str(site_packages)
    assert facts.files[MODULE].sha256 == sha(MODULE_TEXT)
    assert facts.files[MODULE].record_sha256 is None  # pip's RECORD lists no package file
    pre = preflight(host)
    assert pre.ok, pre  # the lock's base hash judges the file: pending, not drifted
    site = str(source)
    done = host.call_ops(
        ops.backup_op("d1", site, prepared()), ops.install_op(site, prepared(), "d1")
    )
    assert done.ok, done
    assert (source / MODULE).read_text() == PATCHED_TEXT
    assert not (site_packages / PACKAGE).exists()  # nothing written beside the dist-info
    assert host.call_ops(ops.restore_op("d1", package=PACKAGE)).ok
    assert (source / MODULE).read_text() == MODULE_TEXT


def test_a_copy_shadowing_the_installed_one_is_refused(tmp_path, monkeypatch):
    """A wheel in site-packages, but `import fakepkg` finds another copy first: patching
    either would be wrong (the version check reads the one the server does not run)."""
    make_site(tmp_path / "site")
    shutil.copytree(tmp_path / "site" / PACKAGE, tmp_path / "shadow" / PACKAGE)
    shadow, site = tmp_path / "shadow", tmp_path / "site"
    for host in host_on(tmp_path, monkeypatch, sys.executable, shadow, site):
        answer = preflight(host)
        failed = answer.failed
        assert failed is not None and failed.code == Code.PACKAGE_NOT_FOUND, answer
        assert f"finds {shadow / PACKAGE} (another copy shadows it)" in failed.error
        assert not (tmp_path / "state" / "lock").exists()


def test_an_editable_install_is_found_by_python_3_8(tmp_path, monkeypatch):
    python = oldest_python()
    if python is None:
        pytest.skip("no python3.8 here (PATH or ~/.pyenv)")
    site, source = make_editable(tmp_path)
    for host in host_on(tmp_path, monkeypatch, python, site, source):
        facts = host.call(("facts", {"package": PACKAGE, "paths": [MODULE]})).facts()
        assert facts is not None and facts.python.startswith("3.8")
        assert (facts.install_kind, facts.package_root) == ("editable", str(source))
