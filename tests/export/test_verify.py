"""`export oci --verify` on a REAL Docker daemon (the sandbox's private dockerd): the image
just exported is loaded, a container of it runs the patchset's smoke suites (integrity,
compile, imports, ddtree; gpu skips without GPUs) with the image's own python, and only
then is --out written.

The negative controls: a patchset whose module does not import in the image, and one whose
DDTree walk accepts nothing past the root, are locked and exported fine (the lock compiles
the results, the export never runs them) and REFUSED by the gate: exit 1, no --out, no
scratch dir beside it, no container or image left behind. (A result that does not compile
is refused earlier, by `patchset lock`.)

The base images are tests/export/images.py's with a venv layer (images.venv_layer): the
interpreter and torch are the machine's, bind-mounted read-only (--verify-mount); sglang,
its editable finder and the patch layer are the image's.
"""

from __future__ import annotations

import json
import shlex
import socket
from pathlib import Path

import pytest

from ddtree_deploy.patchset import copy_version, load_patchset, resolve_patchset, write_lock
from tests.export.conftest import CASES, PATCHSETS, RUNNABLE, runnable_mounts
from tests.support import run_cli

pytestmark = pytest.mark.hosts  # root, the sandbox's sglang envs and its private dockerd

PYTHON = "/opt/venv/bin/python3"
SUITES = ["integrity", "compile", "imports", "ddtree", "gpu"]
# how the negative controls break the patchset's ddtree_utils.py (appended to it), and the
# suite that must catch each
BREAKS = {
    "import": ("import ddtree_verify_no_such_module  # deliberately broken\n", "imports"),
    "walk": (
        "_ddtree_verify_walk = follow_verified_tree\n\n\n"
        "def follow_verified_tree(*args, **kwargs):  # deliberately broken: root only\n"
        "    accepted, bonus = _ddtree_verify_walk(*args, **kwargs)\n"
        "    return accepted[:1], bonus\n",
        "ddtree",
    ),
}


def verify_export(
    base: Path,
    ref: str,
    out: Path,
    docker_host: str,
    env,
    patchsets: Path = PATCHSETS,
    extra: list[str] | None = None,
):
    """Run `export oci --verify` in a real process; return the finished process."""
    args = ["export", "oci", "-p", ref, "--base", str(base), "--out", str(out), "--verify"]
    args += extra or []
    args += ["--docker-host", docker_host, "--verify-python", PYTHON]
    for mount in runnable_mounts(env):
        args += ["--verify-mount", mount]
    return run_cli(*args, "--patchsets-dir", str(patchsets), timeout=1200)


def broken_copy(ref: str, how: str, dest: Path) -> tuple[str, Path]:
    """Copy patchset `ref` to dest/ddtree/<version>.97 with its ddtree_utils.py broken
    (BREAKS[how]), locked; return (the copy's ref, the dir holding it)."""
    source = resolve_patchset(PATCHSETS, ref)
    version = source.spec.version.rsplit(".", 1)[0] + ".97"
    root = copy_version(source, dest / "ddtree" / version, own_files=True, lock=False)
    spec = root / "patchset.toml"
    text = spec.read_text()
    spec.write_text(text.replace(f'version = "{source.spec.version}"', f'version = "{version}"'))
    entry = next(e for e in load_patchset(root).spec.files if e.path.endswith("/ddtree_utils.py"))
    assert entry.new is not None
    module = root / entry.new
    module.write_text(module.read_text() + "\n\n" + BREAKS[how][0])
    write_lock(load_patchset(root))
    return f"ddtree@{version}", dest


def leftovers(daemon) -> tuple[str, str]:
    """The daemon's containers (all) and image tags: what a gate must not leave behind."""
    containers = daemon.check("ps", "-a", "--format", "{{.Names}}")
    tags = daemon.check("images", "--format", "{{.Repository}}:{{.Tag}}")
    return containers, tags


# make test runs the 0.5.23 editable cases; the 0.5.13.post1 site-packages twins, the dir
# verify's import control and the k8s mount variants are serving_full (CI time: ~2 min).
FULL = pytest.mark.serving_full


@pytest.mark.parametrize(
    ("version", "layout"), [pytest.param(*RUNNABLE[0], marks=FULL), RUNNABLE[1]]
)
def test_verify_passes_a_good_patchset_in_a_real_container(
    runnable_images, sandbox_envs, docker_daemon, scratch, version, layout
):
    ref = CASES[version]
    out = scratch / "out"
    done = verify_export(
        runnable_images[(version, layout)], ref, out, docker_daemon.host_url, sandbox_envs[version]
    )
    assert done.returncode == 0, done.stderr[-4000:]
    summary = json.loads(done.stdout.strip().splitlines()[-1])
    verify = summary["verify"]
    assert verify["passed"] is True
    ran = {s["suite"]: s for s in verify["suites"]}
    assert sorted(ran) == sorted(SUITES)
    for name in ("integrity", "compile", "imports", "ddtree"):
        assert ran[name]["passed"] is True and not ran[name]["skipped"], (name, ran[name])
    assert ran["gpu"]["skipped"] is True  # no GPU given: skipped, never passed
    assert "imports: passed" in done.stderr  # the suite lines reach people
    assert (out / "image.tar").is_file() and (out / "oci" / "index.json").is_file()
    containers, tags = leftovers(docker_daemon)
    assert "ddtree-verify-" not in containers and summary["tag"] not in tags


@pytest.mark.parametrize(
    ("version", "layout", "how"),
    [pytest.param(*RUNNABLE[0], "import", marks=FULL), (*RUNNABLE[1], "walk")],
)
def test_verify_refuses_a_broken_patchset_and_writes_nothing(
    runnable_images, sandbox_envs, docker_daemon, scratch, version, layout, how
):
    ref, patchsets = broken_copy(CASES[version], how, scratch / "patchsets")
    out = scratch / "out"
    done = verify_export(
        runnable_images[(version, layout)],
        ref,
        out,
        docker_daemon.host_url,
        sandbox_envs[version],
        patchsets,
    )
    assert done.returncode == 1, (done.stdout[-2000:], done.stderr[-4000:])
    assert not out.exists() and not (scratch / ".out.partial").exists()
    assert sorted(p.name for p in scratch.iterdir()) == ["patchsets"]
    summary = json.loads(done.stdout.strip().splitlines()[-1])
    assert summary["written"] is False and summary["verify"]["passed"] is False
    failed = {s["suite"] for s in summary["verify"]["suites"] if not s["passed"]}
    assert BREAKS[how][1] in failed, summary
    assert "--verify failed" in done.stderr and "nothing written" in done.stderr
    containers, tags = leftovers(docker_daemon)
    assert "ddtree-verify-" not in containers and "sglang-" + ref.replace("@", ":") not in tags


def free_port() -> int:
    """A TCP port free on 127.0.0.1 now (the server in the container binds it: host network)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def serving_flags(env, version: str, *, algorithm: bool) -> list[str]:
    """`--verify-serve-args` for the sandbox's tiny target on a free port (DFLASH's flags,
    with the algorithm itself or without it), the ready timeout and the server's env."""
    from ddtree_sandbox.models import ensure_models
    from ddtree_sandbox.serving import base_launch_args, dflash_args, serve_env

    models = ensure_models(env)
    serve = base_launch_args(models.target, "127.0.0.1", free_port())
    flags = dflash_args(models.draft, models.block_size, version)
    serve += flags if algorithm else flags[2:]  # [2:]: all but --speculative-algorithm X
    extra = ["--verify-serve-args", shlex.join(serve), "--verify-ready-timeout", "600"]
    for key, value in {**serve_env(models.target), "TMPDIR": "/tmp"}.items():
        extra += ["--verify-env", f"{key}={value}"]
    return extra


# a real sglang server starts from the image (CPU), lossless gate included (~60 s a case
# quiet, minutes loaded): both cases are serving_full (make test-serving), as the other
# real-server controls, to keep make test within its 45 min; make test keeps the suites in
# the image (good, and the import-broken and root-only-walk controls above)
@pytest.mark.serving_full
@pytest.mark.parametrize("broken", [False, True], ids=["good", "mask"])
def test_verify_serves_from_the_image_and_gates_lossless(
    runnable_images, sandbox_envs, docker_daemon, scratch, broken
):
    """ddtree 1.1.0 on the 0.5.13.post1 image: the image's own sglang serves DDTREE (its
    [serve] flags merged over the operator's args), the server suite's lossless gate passes
    against the shipped reference. The negative control: the same with the tree mask
    dropped (ddtree_sandbox.broken "mask"), which every other suite passes: exit 1, nothing
    written."""
    from ddtree_sandbox.broken import build_broken_patchset

    version, layout = RUNNABLE[0]
    env = sandbox_envs[version]
    source = PATCHSETS / "ddtree" / "1.1.0"
    patchsets = scratch / "patchsets" if broken else PATCHSETS
    ref = build_broken_patchset(source, patchsets, "mask") if broken else "ddtree@1.1.0"
    extra = serving_flags(env, version, algorithm=False)
    extra += ["--verify-gate", "off"]  # the lossless gate alone (the serving gate's own cases:
    # test_verify_serving_gate.py)
    out = scratch / "out"
    image = runnable_images[(version, layout)]
    done = verify_export(image, ref, out, docker_daemon.host_url, env, patchsets, extra)
    print(done.stderr[-3000:])  # the suites' lines, for `pytest -s`
    summary = json.loads(done.stdout.strip().splitlines()[-1])
    ran = {s["suite"]: s for s in summary["verify"]["suites"]}
    assert ran["imports"]["passed"] and ran["ddtree"]["passed"], ran  # the bug is not there
    if broken:
        assert done.returncode == 1, done.stderr[-4000:]
        assert ran["server"]["passed"] is False and not out.exists()
        assert "lossless" in done.stderr and "nothing written" in done.stderr
    else:
        assert done.returncode == 0, done.stderr[-4000:]
        assert ran["server"]["passed"] is True and (out / "image.tar").is_file()
        assert "lossless_sequential" in done.stderr  # the gate ran, with teeth
    containers, _ = leftovers(docker_daemon)
    assert "ddtree-verify-" not in containers


@pytest.mark.parametrize("how", [None, pytest.param("import", marks=FULL)], ids=["good", "import"])
def test_dir_verify_runs_the_base_with_the_files_mounted(
    runnable_images, sandbox_envs, docker_daemon, scratch, how
):
    """`export dir --verify` on the 0.5.13.post1 wheel layout (an OCI layout: written as a
    loadable tarball first): a container of the BASE, each result file mounted read-only at
    its path, PYTHONPYCACHEPREFIX set, as the Slurm/k8s mount variants run it. The base's
    bytecode of the patched modules is stale and unchecked-hash: the suites pass only
    because they read bytecode under the prefix, as the server would. The import-broken
    patchset is refused: exit 1, no --out, nothing left beside it."""
    version, layout = RUNNABLE[0]
    ref, patchsets = CASES[version], PATCHSETS
    if how:
        ref, patchsets = broken_copy(ref, how, scratch / "patchsets")
    out = scratch / "out"
    args = ["export", "dir", "-p", ref, "--base", str(runnable_images[(version, layout)])]
    args += ["--out", str(out), "--verify", "--docker-host", docker_daemon.host_url]
    args += ["--verify-python", PYTHON, "--patchsets-dir", str(patchsets)]
    for mount in runnable_mounts(sandbox_envs[version]):
        args += ["--verify-mount", mount]
    done = run_cli(*args, timeout=1200)
    summary = json.loads(done.stdout.strip().splitlines()[-1])
    ran = {s["suite"]: s for s in summary["verify"]["suites"]}
    if how is None:
        assert done.returncode == 0, done.stderr[-4000:]
        for name in ("integrity", "compile", "imports", "ddtree"):
            assert ran[name]["passed"] is True, (name, done.stderr[-3000:])
        assert (out / "mounts.txt").is_file()
    else:
        assert done.returncode == 1, done.stderr[-4000:]
        assert ran["imports"]["passed"] is False and not out.exists()
    assert sorted(p.name for p in scratch.iterdir()) == (["out"] if how is None else ["patchsets"])
    containers, tags = leftovers(docker_daemon)
    assert "ddtree-verify-" not in containers and "ddtree-verify-base" not in tags


@pytest.mark.serving_full
def test_k8s_verify_gates_the_mount_variants_on_the_editable_base(
    runnable_images, sandbox_envs, docker_daemon, scratch
):
    """`export k8s --base --verify` on the 0.5.23 editable layout (a docker save tarball,
    rewritten as a loadable one): the ConfigMap/image-volume variants' files mounted over
    the base's editable tree, the suites pass, the manifests are written."""
    version, layout = RUNNABLE[1]
    out = scratch / "out"
    args = ["export", "k8s", "-p", CASES[version], "--out", str(out), "--image", "r/x"]
    args += ["--digest", "sha256:" + "0" * 64, "--workload", "sglang", "--args", ""]
    args += ["--base", str(runnable_images[(version, layout)]), "--verify"]
    args += ["--docker-host", docker_daemon.host_url, "--verify-python", PYTHON]
    for mount in runnable_mounts(sandbox_envs[version]):
        args += ["--verify-mount", mount]
    done = run_cli(*args, "--patchsets-dir", str(PATCHSETS), timeout=1200)
    assert done.returncode == 0, done.stderr[-4000:]
    summary = json.loads(done.stdout.strip().splitlines()[-1])
    ran = {s["suite"]: s for s in summary["verify"]["suites"]}
    for name in ("integrity", "compile", "imports", "ddtree"):
        assert ran[name]["passed"] is True, (name, done.stderr[-3000:])
    assert (out / "image-volume" / "kustomization.yaml").is_file()
    assert sorted(p.name for p in scratch.iterdir()) == ["out"]
    containers, tags = leftovers(docker_daemon)
    assert "ddtree-verify-" not in containers and "ddtree-verify-base" not in tags
