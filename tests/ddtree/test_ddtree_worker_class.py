"""The `ddtree` suite's worker_class check, in the sandbox's real sglang envs.

It resolves DDTREE's worker class for ddtree 1.1.0 on sglang 0.5.13.post1 and 2.0.0 on
0.5.23 (the patchset's files laid over a host-like copy of pristine sglang), and fails,
naming the missing attribute, when 2.0.0 meets a SpeculativeAlgorithm without
`get_platform_worker_cls` (as on 0.5.22, where the port of 2.0.0 broke only at server start).
"""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

import pytest

from ddtree_deploy.patchset import load_patchset
from ddtree_deploy.patchset.materialize import fetch_wheel, materialize
from tests.support import REPO, SMOKE_DIR, load_smoke_script

DDTREE = REPO / "patchsets" / "ddtree"
SPEC_INFO = "sglang/srt/speculative/spec_info.py"
PROBE = (
    "import json, sys\n"
    "sys.path.append(sys.argv[1])\n"
    "import ddtree\n"
    "passed, detail = ddtree.check_worker_class()\n"
    "print(json.dumps({'passed': passed, 'detail': detail}))\n"
)


@pytest.fixture(scope="module")
def smoke_ddtree() -> ModuleType:
    return load_smoke_script("_smoke_ddtree", "ddtree.py")


def make_patched_venv(venv: Path, version: str, edit: Callable[[Path], None] | None = None) -> Path:
    """Return the python of a host-like venv (the sandbox env of ddtree VERSION's target, its
    own copy of pristine sglang) with the patchset's results written over it, then `edit`
    called on its site-packages."""
    from ddtree_sandbox import ensure_base_env
    from ddtree_sandbox.hosts import make_host_venv

    patchset = load_patchset(DDTREE / version)
    site_packages = make_host_venv(venv, ensure_base_env(patchset.spec.target.version))
    for item in materialize(patchset, fetch_wheel(patchset.spec.target)):
        (site_packages / item.entry.path).write_bytes(item.result)
    if edit:
        edit(site_packages)
    return venv / "bin" / "python"


def run_worker_class(python: Path) -> dict:
    """Return {passed, detail} of check_worker_class run by `python` (the suite's own code)."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    done = subprocess.run(
        [str(python), "-W", "ignore", "-c", PROBE, str(SMOKE_DIR)],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def drop_get_platform_worker_cls(site_packages: Path) -> None:
    """Rename SpeculativeAlgorithm.get_platform_worker_cls in this venv's spec_info.py copy."""
    spec_info = site_packages / SPEC_INFO
    source = spec_info.read_text()
    assert source.count("def get_platform_worker_cls(") == 1
    spec_info.write_text(source.replace("def get_platform_worker_cls(", "def _gone_0523(", 1))


@pytest.mark.parametrize(
    ("version", "worker"),
    [
        ("1.1.0", "sglang.srt.speculative.dflash_worker.DFlashWorker"),
        ("2.0.0", "sglang.srt.speculative.dflash_worker_v2.DFlashWorkerV2"),
    ],
)
def test_worker_class_resolves_on_the_target(tmp_path: Path, version: str, worker: str):
    result = run_worker_class(make_patched_venv(tmp_path / "venv", version))
    assert result == {"passed": True, "detail": worker}


def test_worker_class_fails_without_get_platform_worker_cls(tmp_path: Path):
    python = make_patched_venv(tmp_path / "venv", "2.0.0", drop_get_platform_worker_cls)
    result = run_worker_class(python)
    assert not result["passed"]
    first_line, where = result["detail"].splitlines()
    assert first_line.startswith("AttributeError: ") and "'get_platform_worker_cls'" in first_line
    assert (
        where.startswith("raised at ") and "/sglang/srt/speculative/ddtree_algorithm.py:" in where
    )


def test_unresolved_server_args_skip_post_init_and_disable_overlap(smoke_ddtree):
    @dataclasses.dataclass
    class FakeServerArgs:  # resolving would read the model, as sglang 0.5.13's does
        model_path: str
        disable_overlap_schedule: bool = False
        tp_size: int = 1
        extra: list = dataclasses.field(default_factory=list)

        def __post_init__(self) -> None:
            raise AssertionError("resolved")

    args = smoke_ddtree.build_unresolved_server_args(FakeServerArgs)
    assert args.model_path == "" and args.disable_overlap_schedule is True
    assert args.tp_size == 1 and args.extra == []
    assert args.extra is not smoke_ddtree.build_unresolved_server_args(FakeServerArgs).extra
