"""The exported image on a REAL Docker daemon: `docker load` of OUT/image.tar, then the
sandbox's python run inside the container, where overlay2 (not our unpacker) has applied
the patch layer's whiteouts: `import sglang` finds the patched files, no bytecode of a
patched module is left, the loader runs the new source.

The session's private dockerd (tests/conftest.py `docker_daemon`: its own data/exec root
and socket, `--bridge=none`, no iptables; notes: ../shared/notes/real-containers.md).
Skipped only where we are not root (the sandbox's envs need it); as root, a missing
docker.io is a failure, not a skip. The container gets the machine's /usr (python3) and the
sandbox's envs read-only: the test images hold sglang, not an interpreter.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from ddtree_deploy.patchset import resolve_patchset
from tests.export import images
from tests.export.conftest import CASES, PATCHSETS
from tests.export.test_oci import export

pytestmark = pytest.mark.hosts  # root and the sandbox's sglang envs (built once)

HERE = Path(__file__).resolve().parent


@pytest.fixture(scope="module")
def docker_env(docker_daemon) -> dict[str, str]:
    """The environment that points `docker` at the session's private dockerd
    (tests/conftest.py `docker_daemon`): as root, a missing docker.io or a daemon that does
    not come up FAILS the test, never skips it."""
    return docker_daemon.env()


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
