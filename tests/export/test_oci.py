"""`export oci` against base images built from the sandbox's real sglang installs: the
patched files land where `import sglang` finds them, no stale bytecode survives (and without
the whiteouts it would run), two exports are byte-identical."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest
from typer.testing import CliRunner

from ddtree_deploy.cli.app import app
from ddtree_deploy.patchset import resolve_patchset
from tests.export import images
from tests.export.conftest import CASES, PATCHSETS

pytestmark = pytest.mark.hosts  # root and the sandbox's sglang envs (built once)

PROBE = Path(__file__).with_name("probe.py")
CASE_IDS = [(v, layout) for v in CASES for layout in ("site", "editable")]
# the second export (same digests, same tarball bytes) and the negative control (unpacked
# without whiteouts) run for these two: both versions, both layouts; each costs an export or
# an unpack more
CONTROLS = {("0.5.13.post1", "site"), ("0.5.23", "editable")}


def export(base: Path, ref: str, out: Path) -> dict:
    """Run `ddtree-deploy export oci` and return its JSON summary."""
    result = CliRunner().invoke(
        app,
        ["export", "oci", "-p", ref, "--base", str(base), "--out", str(out)],
        env={"DDTREE_DEPLOY_PATCHSETS": str(PATCHSETS)},
    )
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout.strip().splitlines()[-1])


def probe(env, root: Path, layout: str, rels: list[str]) -> dict:
    """Run tests/export/probe.py with the sandbox python against the unpacked image."""
    site = root / images.SITE
    extra = [str(env.overlay_dir)] if env.overlay_dir else []
    cmd = [str(env.python), "-B", str(PROBE), str(site), json.dumps(rels), *extra]
    if layout == "editable":  # the finder names /sgl-workspace: mount the image's there
        Path("/sgl-workspace").mkdir(exist_ok=True)
        workspace = root / "sgl-workspace"
        script = 'mount --bind "$0" /sgl-workspace && exec "$@"'
        cmd = [
            "unshare",
            "--mount",
            "--propagation",
            "private",
            "sh",
            "-c",
            script,
            str(workspace),
            *cmd,
        ]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=300, cwd="/")
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize(("version", "layout"), CASE_IDS, ids=["-".join(c) for c in CASE_IDS])
def test_export_oci_lands_where_python_imports(
    base_images, sandbox_envs, scratch, scratch_root, version, layout
):
    ref = CASES[version]
    lock = resolve_patchset(PATCHSETS, ref).require_lock()
    first = export(base_images[(version, layout)], ref, scratch / "one")
    if (version, layout) in CONTROLS:  # byte-reproducible: two runs, the same bytes
        second = export(base_images[(version, layout)], ref, scratch / "two")
        assert first["manifest_digest"] == second["manifest_digest"]
        assert first["layer_digest"] == second["layer_digest"]
        assert (scratch / "one/image.tar").read_bytes() == (scratch / "two/image.tar").read_bytes()
        shutil.rmtree(scratch / "two")
    expected_root = "/" + (images.SITE if layout == "site" else images.WORKSPACE)
    assert (first["root"], first["install"]) == (
        expected_root,
        "wheel" if layout == "site" else "editable",
    )
    rels = sorted(lock.files)
    patched = sorted(p for p, f in lock.files.items() if f.kind == "patch")
    assert len(first["whiteouts"]) == len(patched)  # one per module the base had compiled

    unpacked = images.unpack_image(scratch / "one/oci", scratch / "root", cache=scratch_root)
    seen = probe(sandbox_envs[version], unpacked, layout, rels)
    assert seen["file"] == f"{expected_root}/sglang/__init__.py" or seen["file"] == str(
        unpacked / expected_root.lstrip("/") / "sglang/__init__.py"
    )
    for rel in rels:
        assert seen["modules"][rel]["sha256"] == lock.files[rel].result_sha256, rel
        assert seen["modules"][rel]["runs_source"], f"{rel}: Python would run stale bytecode"
        assert seen["modules"][rel]["pycs"] == [], rel
    for rel in patched:
        cache = unpacked / expected_root.lstrip("/") / Path(rel).parent / "__pycache__"
        assert not list(cache.glob(Path(rel).stem + ".*.pyc")), f"stale .pyc of {rel} survives"

    if (version, layout) not in CONTROLS:
        return
    # negative control: the same layers without applying whiteouts leave the base's
    # unchecked-hash bytecode, and Python's loader runs it instead of the patched source
    stale_root = images.unpack_image(
        scratch / "one/oci", scratch / "stale", whiteouts=False, cache=scratch_root
    )
    package_root = stale_root / expected_root.lstrip("/")
    cmd = [str(sandbox_envs[version].python), "-B", str(PROBE), "--root", str(package_root)]
    done = subprocess.run([*cmd, json.dumps(patched)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    stale = json.loads(done.stdout.strip().splitlines()[-1])
    assert stale["modules"] and not any(m["runs_source"] for m in stale["modules"].values())
    assert all(m["pycs"] for m in stale["modules"].values())  # the stale .pyc are there


def test_export_oci_config_keeps_the_base(base_images, scratch):
    base = base_images[("0.5.13.post1", "site")]
    done = export(base, CASES["0.5.13.post1"], scratch / "out")
    layout = scratch / "out/oci"
    index = json.loads((layout / "index.json").read_text())
    manifest = json.loads(
        (layout / "blobs/sha256" / index["manifests"][0]["digest"][7:]).read_text()
    )
    config = json.loads((layout / "blobs/sha256" / manifest["config"]["digest"][7:]).read_text())
    base_index = json.loads((base / "index.json").read_text())
    base_manifest = json.loads(
        (base / "blobs/sha256" / base_index["manifests"][0]["digest"][7:]).read_text()
    )
    # the base's layers by digest, then one layer
    assert manifest["layers"][:-1] == base_manifest["layers"]
    assert len(manifest["layers"]) == len(base_manifest["layers"]) + 1
    assert config["rootfs"]["diff_ids"][-1] == done["layer_diff_id"]
    inner = config["config"]
    for key, value in images.CONFIG_CMD.items():
        assert inner[key] == value
    labels = inner["Labels"]
    assert labels["org.example.base"] == "yes"
    assert labels["io.ddtree-deploy.patchset"] == "ddtree@1.1.12"
    assert labels["io.ddtree-deploy.base.digest"] == base_index["manifests"][0]["digest"]
    assert labels["io.ddtree-deploy.lock.sha256"] == done["lock_sha256"]
    legacy = json.loads((layout / "manifest.json").read_text())
    assert legacy[0]["RepoTags"] == ["sglang-ddtree:1.1.12"]


def test_export_oci_refuses_another_sglang(base_images, scratch):
    """A 2.1.x patchset onto the 0.5.13.post1 image: exit 2, naming both versions, no --out."""
    result = CliRunner().invoke(
        app,
        [
            "export",
            "oci",
            "-p",
            CASES["0.5.23"],
            "--base",
            str(base_images[("0.5.13.post1", "site")]),
        ]
        + ["--out", str(scratch / "out")],
        env={"DDTREE_DEPLOY_PATCHSETS": str(PATCHSETS)},
    )
    assert result.exit_code == 2, result.output
    assert "0.5.13.post1" in result.output and "0.5.23" in result.output
    assert not (scratch / "out").exists() and not list(scratch.iterdir())
