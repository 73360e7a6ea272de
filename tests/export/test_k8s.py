"""`export k8s`: the overlay, Helm values, ConfigMap and image-volume variants, checked
offline and rendered with the real `kubectl kustomize` when kubectl is installed. No
Kubernetes API server runs here: nothing is applied to a cluster."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest
from typer.testing import CliRunner

from ddtree_deploy.cli.app import app
from ddtree_deploy.errors import ConfigError
from ddtree_deploy.export import k8s
from ddtree_deploy.export.files import ResultFiles
from ddtree_deploy.export.k8s_check import check_files
from tests.export.conftest import CASES, PATCHSETS

DIGEST = "sha256:" + "ab" * 32
SERVE = ["--speculative-algorithm", "DDTREE", "--speculative-ddtree-budget", "8"]
POD = {
    "containers": [
        {
            "name": "sglang",
            "image": "lmsysorg/sglang:v0.5.13",
            "args": ["--model-path", "/models/m", "--speculative-ddtree-budget", "4"],
            "volumeMounts": [],
            "env": [],
        }
    ],
    "volumes": [],
}
BASES = {
    "deployment": {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "sglang"},
        "spec": {
            "selector": {"matchLabels": {"app": "s"}},
            "template": {"metadata": {"labels": {"app": "s"}}, "spec": POD},
        },
    },
    "lws": {
        "apiVersion": "leaderworkerset.x-k8s.io/v1",
        "kind": "LeaderWorkerSet",
        "metadata": {"name": "sglang"},
        "spec": {
            "leaderWorkerTemplate": {
                "size": 2,
                "leaderTemplate": {"spec": POD},
                "workerTemplate": {"spec": POD},
            }
        },
    },
}


def test_merge_args_sets_each_flag_once():
    current = ["--model-path", "/m", "--speculative-ddtree-budget", "4", "--enable-metrics"]
    merged = k8s.merge_args(current, SERVE)
    assert merged == ["--model-path", "/m", "--enable-metrics", *SERVE]


def test_configmap_refuses_over_one_mib_and_deletions():
    spec = k8s.Workload("deployment", "sglang")
    big = ResultFiles("/r", {"sglang/a.py": b"x" * (k8s.CONFIGMAP_MAX_BYTES + 1)})
    with pytest.raises(ConfigError, match="over the 1 MiB"):
        k8s.configmap_variant(spec, big, (), "f")
    small = ResultFiles("/r", {"sglang/a.py": b"x = 1\n"})
    with pytest.raises(ConfigError, match="cannot|not delete"):
        k8s.configmap_variant(spec, small, ("sglang/old.py",), "f")
    with pytest.raises(ConfigError, match="not delete"):
        k8s.image_volume_variant(spec, small, ("sglang/old.py",), "img@" + DIGEST)


def test_check_files_catches_broken_manifests():
    """The offline checks are not vacuous: each mutation is reported."""
    spec = k8s.Workload("deployment", "sglang")
    docs = k8s.configmap_variant(spec, ResultFiles("/r", {"sglang/a.py": b"x = 1\n"}), (), "f")
    assert check_files(docs) == []
    patch = docs["patch-mounts.yaml"]
    patch["spec"]["template"]["spec"]["containers"][0]["volumeMounts"][0]["subPath"] = "../etc"
    docs["configmap.yaml"]["metadata"]["name"] = "Bad_Name"
    problems = check_files(docs)
    assert any("subPath" in p for p in problems) and any("DNS-1123" in p for p in problems)
    overlay = k8s.kustomize_overlay(spec, "reg/x", DIGEST, SERVE, ["../base"])
    overlay["kustomization.yaml"]["images"][0]["digest"] = "latest"
    del overlay["patch-args.yaml"]
    problems = check_files(overlay)
    assert any("sha256 digest" in p for p in problems) and any("not written" in p for p in problems)


def _render(folder: Path) -> list[dict]:
    import yaml

    done = subprocess.run(
        ["kubectl", "kustomize", str(folder)], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    return list(yaml.safe_load_all(done.stdout))


@pytest.mark.hosts  # root and the sandbox's sglang envs (the base image)
@pytest.mark.parametrize("kind", ["deployment", "lws"])
def test_export_k8s_renders(base_images, scratch, kind):
    base_dir = scratch / "base"
    base_dir.mkdir()
    (base_dir / "workload.yaml").write_text(json.dumps(BASES[kind]))
    (base_dir / "kustomization.yaml").write_text(json.dumps({"resources": ["workload.yaml"]}))
    out = scratch / "out"
    result = CliRunner().invoke(
        app,
        [
            "export",
            "k8s",
            "-p",
            CASES["0.5.13.post1"],
            "--base",
            str(base_images[("0.5.13.post1", "site")]),
        ]
        + [
            "--out",
            str(out),
            "--image",
            "reg.example/sglang-ddtree",
            "--digest",
            DIGEST,
            "--workload",
            "sglang",
        ]
        + ["--kind", kind, "--args", "--model-path /models/m --speculative-ddtree-budget 4"]
        + ["--resource", "../../base"],  # relative to each overlay (kustomize refuses absolute)
        env={"DDTREE_DEPLOY_PATCHSETS": str(PATCHSETS)},
    )
    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout.strip().splitlines()[-1])
    assert summary["args"] == ["--model-path", "/models/m", *SERVE]
    assert summary["refused"] == {}
    values = json.loads((out / "helm/values-ddtree.yaml").read_text())
    assert values["image"] == {
        "repository": "reg.example/sglang-ddtree",
        "tag": "",
        "digest": DIGEST,
    }
    if shutil.which("kubectl") is None:
        pytest.skip("kubectl is not installed: the overlays were checked offline only")
    rendered = _render(out / "kustomize")
    workload = next(d for d in rendered if d["kind"] != "ConfigMap")
    pods = (
        [workload["spec"]["template"]["spec"]]
        if kind == "deployment"
        else [
            workload["spec"]["leaderWorkerTemplate"][t]["spec"]
            for t in ("leaderTemplate", "workerTemplate")
        ]
    )
    for pod in pods:
        assert pod["containers"][0]["image"] == f"reg.example/sglang-ddtree@{DIGEST}"
        assert pod["containers"][0]["args"] == ["--model-path", "/models/m", *SERVE]
    for variant in ("configmap", "image-volume"):
        rendered = _render(out / variant)
        workload = next(d for d in rendered if d["kind"] != "ConfigMap")
        pod = (
            workload["spec"]["template"]["spec"]
            if kind == "deployment"
            else workload["spec"]["leaderWorkerTemplate"]["workerTemplate"]["spec"]
        )
        mounts = {m["mountPath"]: m for m in pod["containers"][0]["volumeMounts"]}
        assert "/opt/venv/lib/python3.11/site-packages/sglang/srt/server_args.py" in mounts
        assert {"name": "PYTHONPYCACHEPREFIX", "value": "/tmp/ddtree-pycache"} in pod["containers"][
            0
        ]["env"]
        assert pod["containers"][0]["image"] == "lmsysorg/sglang:v0.5.13"  # base image kept


def test_export_k8s_without_a_base_writes_overlay_and_values_only(tmp_path):
    """No --base: the overlay and the values (image + flags) need none; the mount variants
    are refused with the reason. Rendered by the real kubectl where installed."""
    base_dir = tmp_path / "base"
    base_dir.mkdir()
    (base_dir / "workload.yaml").write_text(json.dumps(BASES["deployment"]))
    (base_dir / "kustomization.yaml").write_text(json.dumps({"resources": ["workload.yaml"]}))
    out = tmp_path / "out"
    result = CliRunner().invoke(
        app,
        ["export", "k8s", "-p", CASES["0.5.23"], "--out", str(out), "--image", "reg/x"]
        + ["--digest", DIGEST, "--workload", "sglang", "--resource", "../../base"]
        + ["--args", "--model-path /models/m --speculative-ddtree-budget 4"],
        env={"DDTREE_DEPLOY_PATCHSETS": str(PATCHSETS)},
    )
    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout.strip().splitlines()[-1])
    assert set(summary["refused"]) == {"configmap", "image-volume"}
    assert "needs --base" in summary["refused"]["configmap"]
    assert sorted(p.name for p in out.iterdir()) == ["helm", "kustomize"]
    if shutil.which("kubectl") is None:
        pytest.skip("kubectl is not installed: the overlay was checked offline only")
    pod = _render(out / "kustomize")[0]["spec"]["template"]["spec"]
    assert pod["containers"][0]["image"] == f"reg/x@{DIGEST}"
    assert pod["containers"][0]["args"] == ["--model-path", "/models/m", *SERVE]
