"""`export dir`: the result files to bind-mount under Slurm, and the mount lines."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from ddtree_deploy.agent.host.pure import sha256_bytes
from ddtree_deploy.cli.app import app
from ddtree_deploy.patchset import resolve_patchset
from tests.export.conftest import CASES, PATCHSETS

pytestmark = pytest.mark.hosts  # root and the sandbox's sglang envs (built once)


def test_export_dir_writes_locked_results_and_lines(base_images, scratch):
    ref = CASES["0.5.23"]
    out = scratch / "out"
    result = CliRunner().invoke(
        app,
        [
            "export",
            "dir",
            "-p",
            ref,
            "--base",
            str(base_images[("0.5.23", "editable")]),
            "--out",
            str(out),
        ],
        env={"DDTREE_DEPLOY_PATCHSETS": str(PATCHSETS)},
    )
    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout.strip().splitlines()[-1])
    lock = resolve_patchset(PATCHSETS, ref).require_lock()
    assert len(summary["mounts"]) == len(lock.files)
    for src, dst in summary["mounts"]:
        rel = dst.removeprefix("/sgl-workspace/sglang/python/")
        assert sha256_bytes(open(src, "rb").read()) == lock.files[rel].result_sha256
        assert f"{src}:{dst}:ro" in summary["pyxis"] and f"{src}:{dst}:ro" in summary["apptainer"]
    assert "PYTHONPYCACHEPREFIX" in (out / "mounts.txt").read_text()
    assert not list(out.parent.glob(".*.partial"))


def test_export_dir_refuses_an_existing_out(base_images, scratch):
    out = scratch / "mine"
    out.mkdir()
    (out / "keep.txt").write_text("user file")
    result = CliRunner().invoke(
        app,
        [
            "export",
            "dir",
            "-p",
            CASES["0.5.23"],
            "--base",
            str(base_images[("0.5.23", "editable")]),
            "--out",
            str(out),
        ],
        env={"DDTREE_DEPLOY_PATCHSETS": str(PATCHSETS)},
    )
    assert result.exit_code == 2 and "already exists" in result.output
    assert (out / "keep.txt").read_text() == "user file"
