"""The exported image on a REAL Docker daemon: `docker load` of OUT/image.tar, then the
sandbox's python run inside the container, where overlay2 (not our unpacker) has applied
the patch layer's whiteouts: `import sglang` finds the patched files, no bytecode of a
patched module is left, the loader runs the new source.

A private dockerd per module (its own data/exec root and socket, `--bridge=none`, no
iptables; notes: ../shared/notes/real-containers.md). Skipped where dockerd is not
installed or we are not root. The container gets the machine's /usr (python3) and the
sandbox's envs read-only: the test images hold sglang, not an interpreter.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from ddtree_deploy.patchset import resolve_patchset
from tests.export import images
from tests.export.conftest import CASES, PATCHSETS
from tests.export.test_oci import export

pytestmark = pytest.mark.hosts  # root and the sandbox's sglang envs (built once)

HERE = Path(__file__).resolve().parent


@pytest.fixture(scope="module")
def docker_env() -> Iterator[dict[str, str]]:
    """Start a private dockerd; yield the env that points `docker` at it; stop it."""
    if os.geteuid() != 0 or not shutil.which("dockerd") or not shutil.which("docker"):
        pytest.skip("needs root and Docker (dockerd, docker) installed")
    root = Path(tempfile.mkdtemp(prefix="ddtree-dockerd-", dir="/tmp"))
    env = {**os.environ, "DOCKER_HOST": f"unix://{root}/sock"}
    cmd = ["dockerd", "--bridge=none", "--iptables=false", "--ip-masq=false"]
    cmd += ["--data-root", f"{root}/data", "--exec-root", f"{root}/exec", "-p", f"{root}/pid"]
    cmd += ["-H", env["DOCKER_HOST"]]
    with open(root / "dockerd.log", "wb") as log:
        daemon = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        deadline = time.monotonic() + 120
        while subprocess.run(["docker", "info"], env=env, capture_output=True).returncode != 0:
            if daemon.poll() is not None or time.monotonic() > deadline:
                pytest.fail(f"dockerd did not start: {(root / 'dockerd.log').read_text()[-2000:]}")
            time.sleep(0.5)
        yield env
    finally:
        daemon.terminate()
        try:
            daemon.wait(60)
        except subprocess.TimeoutExpired:
            daemon.kill()
            daemon.wait()
        # a daemon that died hard can leave its netns bind mount under exec-root
        with open("/proc/self/mounts") as mounts:
            left = [line.split()[1] for line in mounts if line.split()[1].startswith(str(root))]
        for point in sorted(left, reverse=True):
            subprocess.run(["umount", "-l", point], capture_output=True)
        shutil.rmtree(root, ignore_errors=True)


@pytest.mark.parametrize(("version", "layout"), [("0.5.13.post1", "site"), ("0.5.23", "editable")])
def test_docker_loads_and_runs_the_patched_image(
    base_images, sandbox_envs, docker_env, scratch, version, layout
):
    ref = CASES[version]
    lock = resolve_patchset(PATCHSETS, ref).require_lock()
    summary = export(base_images[(version, layout)], ref, scratch / "out")
    done = subprocess.run(
        ["docker", "load", "-i", summary["tarball"]],
        env=docker_env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0 and summary["tag"] in done.stdout, done.stderr
    env = sandbox_envs[version]
    mounts = [
        "/usr:/usr:ro",
        "/usr/lib:/lib:ro",
        "/usr/lib64:/lib64:ro",
        f"{env.cache_dir}:{env.cache_dir}:ro",
        f"{HERE}:/probe:ro",
    ]
    rels = sorted(lock.files)
    cmd = ["docker", "run", "--rm", "--network", "none", "--entrypoint", str(env.python)]
    for mount in mounts:
        cmd += ["-v", mount]
    site = "/" + images.SITE
    extra = [str(env.overlay_dir)] if env.overlay_dir else []
    cmd += [summary["tag"], "-B", "/probe/probe.py", site, json.dumps(rels), *extra]
    done = subprocess.run(cmd, env=docker_env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    assert seen["file"] == summary["root"] + "/sglang/__init__.py"
    for rel in rels:
        module = seen["modules"][rel]
        assert module["sha256"] == lock.files[rel].result_sha256, rel
        assert module["runs_source"] and module["pycs"] == [], (rel, module)
    subprocess.run(["docker", "rmi", summary["tag"]], env=docker_env, capture_output=True)
