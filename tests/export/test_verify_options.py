"""`export oci --verify` refuses what it cannot gate, before anything is written: no
reachable container runtime (exit 2, never a silent pass), bad --verify-* options (exit 2).
And the runtime's argv (pure)."""

from __future__ import annotations

import json
import tarfile

import pytest

from ddtree_deploy.export.base_tarball import write_base_tarball
from ddtree_deploy.export.image_read import open_base
from ddtree_deploy.pipeline.image_serve import ServeCheck
from ddtree_deploy.transport.container_runtime import ContainerSpec, run_argv
from tests.export import images
from tests.export.conftest import PATCHSETS
from tests.support import make_patchset, run_cli


def verify(tmp_path, *extra: str):
    """`export oci --verify` of a real patchset onto a base that is never read (the options
    and the runtime are checked first)."""
    out = tmp_path / "out"
    args = ["export", "oci", "-p", "ddtree@2.1.2", "--base", str(tmp_path / "no-base")]
    args += ["--out", str(out), "--patchsets-dir", str(PATCHSETS), "--verify", *extra]
    return run_cli(*args, timeout=120), out


def test_no_reachable_runtime_is_exit_2_and_nothing_written(tmp_path):
    socket = tmp_path / "no-daemon.sock"
    done, out = verify(tmp_path, "--docker-host", f"unix://{socket}")
    assert done.returncode == 2, done.stderr
    assert "--verify needs" in done.stderr
    assert str(socket) in done.stderr or "not installed" in done.stderr
    assert not out.exists() and sorted(p.name for p in tmp_path.iterdir()) == []


def test_without_verify_no_runtime_is_asked(tmp_path):
    """The negative control of the above: the same export without --verify gets past the
    runtime check and fails only on the missing base."""
    out = tmp_path / "out"
    args = ["export", "oci", "-p", "ddtree@2.1.2", "--base", str(tmp_path / "no-base")]
    done = run_cli(*args, "--out", str(out), "--patchsets-dir", str(PATCHSETS), timeout=120)
    assert done.returncode == 2 and "--verify needs" not in done.stderr
    assert "no-base" in done.stderr


@pytest.mark.parametrize(
    ("extra", "said"),
    [
        (["--verify-python", "python3"], "--verify-python 'python3'"),
        (["--verify-mount", "models:/models"], "--verify-mount 'models:/models'"),
        (["--verify-mount", "/m:/models:rx"], "--verify-mount '/m:/models:rx'"),
        (["--verify-env", "1X=2"], "--verify-env '1X=2'"),
        (["--verify-suite", "server"], "--verify-suite server: the server suite needs"),
        (["--verify-serve-args", "'unclosed"], "--verify-serve-args: No closing quotation"),
        (["--verify-serve-args", ""], "--verify-serve-args: give the server's args"),
        (["--verify-suite", "nosuch"], "unknown smoke suite 'nosuch'"),
        (["--runtime", "lxc"], "--runtime 'lxc'"),
        (
            ["--verify-serve-args", "--model-path /m", "--verify-gate", "slow"],
            "--verify-gate 'slow'",
        ),
        (["--verify-gate-config", "g.toml"], "--verify-gate-config: only with --verify-serve-args"),
        (
            ["--verify-serve-args", "--model-path /m", "--verify-gate-config", "/no/gate.toml"],
            "--verify-gate-config /no/gate.toml",
        ),
    ],
)
def test_bad_verify_options_are_exit_2(tmp_path, extra, said):
    done, out = verify(tmp_path, *extra)
    assert done.returncode == 2, done.stderr
    assert said in done.stderr
    assert not out.exists()


def test_run_argv_uses_the_hosts_network_and_no_shell():
    spec = ContainerSpec(
        image="sha256:abc",
        name="ddtree-verify-1",
        entrypoint="/opt/venv/bin/python3",
        args=("-c", "import signal\nsignal.pause()"),
        mounts=("/usr:/usr:ro",),
        env={"A": "b c"},
        gpus=2,
        shm_size="1g",
    )
    assert run_argv(spec) == [
        "run", "-d", "--network", "host", "--name", "ddtree-verify-1",
        "--entrypoint", "/opt/venv/bin/python3", "-v", "/usr:/usr:ro", "-e", "A=b c",
        "--gpus", "2", "--shm-size", "1g", "sha256:abc", "-c", "import signal\nsignal.pause()",
    ]  # fmt: skip


def test_verify_options_need_verify(tmp_path):
    out = tmp_path / "out"
    args = ["export", "oci", "-p", "ddtree@2.1.2", "--base", str(tmp_path / "no-base")]
    args += ["--out", str(out), "--patchsets-dir", str(PATCHSETS)]
    done = run_cli(*args, "--verify-serve-args", "--model-path /m", timeout=120)
    assert done.returncode == 2 and "--verify-serve-args: only with --verify" in done.stderr
    done = run_cli(*args, "--verify-gate-config", "g.toml", timeout=120)
    assert done.returncode == 2 and "--verify-gate-config: only with --verify" in done.stderr


@pytest.mark.parametrize(
    ("args", "url"),
    [
        ((), "http://127.0.0.1:30000"),
        (("--host", "0.0.0.0", "--port", "31000"), "http://127.0.0.1:31000"),
        (("--host=127.0.0.7", "--port=8"), "http://127.0.0.7:8"),
        (("--host", "::1"), "http://[::1]:30000"),
    ],
)
def test_serve_check_url(args, url):
    assert ServeCheck(args).url == url


def test_serve_check_expects_what_its_args_ask_for():
    args = ("--model-path", "/m", "--speculative-algorithm", "DDTREE")
    spec = ServeCheck((*args, "--speculative-ddtree-budget", "8")).smoke_spec()
    assert spec.expected_algorithm == "DDTREE" and spec.expected_ddtree_budget == 8
    assert ServeCheck(("--model-path", "/m")).smoke_spec().expected_algorithm is None


@pytest.mark.parametrize("kind", ["oci", "docker-save"])
def test_base_tarball_is_the_base_loadable(tmp_path, kind):
    """The mount variants' gate loads the BASE: its config and layers, as stored, under a
    legacy manifest.json naming the tag (read back by the export's own reader here; by a
    real dockerd in test_verify.py)."""
    layers = [images.top_layer(), images.top_layer() + b"\0" * 512]
    if kind == "oci":
        base = images.write_oci_layout(layers, tmp_path / "base")
    else:
        base = images.write_docker_save(layers, tmp_path / "base.tar")
    out = tmp_path / "load.tar"
    pinned = write_base_tarball(base, out, "ddtree-verify-base:x")
    with open_base(base) as (want, _), open_base(out) as (got, _):
        assert got.config_digest == want.config_digest and pinned == want.pinned_digest
        assert got.diff_ids == want.diff_ids
    with tarfile.open(out) as tar:
        manifest = json.loads(tar.extractfile("manifest.json").read())
    assert manifest[0]["RepoTags"] == ["ddtree-verify-base:x"]


def test_k8s_verify_needs_base(tmp_path):
    out = tmp_path / "out"
    args = ["export", "k8s", "-p", "ddtree@2.1.2", "--out", str(out), "--image", "r/x"]
    args += ["--digest", "sha256:" + "0" * 64, "--workload", "sglang", "--args", ""]
    done = run_cli(*args, "--patchsets-dir", str(PATCHSETS), "--verify", timeout=120)
    assert done.returncode == 2 and "--verify needs --base" in done.stderr
    assert not out.exists()


def test_dir_verify_without_a_runtime_is_exit_2(tmp_path):
    out = tmp_path / "out"
    args = ["export", "dir", "-p", "ddtree@2.1.2", "--base", str(tmp_path / "no-base")]
    args += ["--out", str(out), "--patchsets-dir", str(PATCHSETS), "--verify"]
    done = run_cli(*args, "--docker-host", f"unix://{tmp_path}/none.sock", timeout=120)
    assert done.returncode == 2 and "--verify needs" in done.stderr
    assert not out.exists()


def test_compile_runs_last_so_the_suites_see_the_image_as_shipped():
    from ddtree_deploy.cli.export_verify import shipped_order

    order = shipped_order(("integrity", "compile", "imports", "ddtree", "gpu", "server"))
    assert order == ["integrity", "imports", "ddtree", "gpu", "server", "compile"]


def test_a_patchset_without_suites_is_not_verified_by_nothing(tmp_path):
    """No smoke.suites and no --verify-suite: exit 2 (a gate that checks nothing would pass)."""
    patchsets = make_patchset(tmp_path, suites=[])
    out = tmp_path / "out"
    args = ["export", "oci", "-p", "ddtree@1.0.0", "--base", str(tmp_path / "no-base")]
    done = run_cli(*args, "--out", str(out), "--patchsets-dir", str(patchsets), "--verify")
    assert done.returncode == 2 and "nothing would be checked" in done.stderr
    assert not out.exists()
