"""mypy reads the bodies of the agent's ops: a wrong type in an op fails `make lint`.

The host modules are mostly unannotated (they run on the host's python, 3.8 or newer);
pyproject's override for them sets check_untyped_defs, without which mypy would skip
every unannotated body. Proven on a temporary copy of agent/host/ under the same module
names, checked with the project's own mypy config: the copy as it is passes (the control),
the copy with one wrong line in an op fails, naming that line.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from mypy import api

from ddtree_deploy.agent.host import wire

ROOT = Path(__file__).resolve().parents[2]
HOST_DIR = Path(wire.__file__).parent
OP_MODULE = "ops_history.py"
ANCHOR = '    started = list(dict.fromkeys(e["deploy_id"] for e in entries))\n'
BAD_LINE = '    shown = len(started) + " deploys"  # int + str: a TypeError on the host\n'


@pytest.fixture(scope="module")
def cache_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One mypy cache for both runs: the second reads the unchanged modules from it."""
    return tmp_path_factory.mktemp("mypy-cache")


def copy_host(root: Path) -> Path:
    """Copy agent/host/ to root/ddtree_deploy/agent/host (package files included, so mypy
    names the modules ddtree_deploy.agent.host.* and the override applies); return it."""
    host = root / "ddtree_deploy" / "agent" / "host"
    shutil.copytree(HOST_DIR, host, ignore=shutil.ignore_patterns("__pycache__"))
    for package in (root / "ddtree_deploy", root / "ddtree_deploy" / "agent"):
        (package / "__init__.py").write_text("")
    return host


def run_mypy(host: Path, cache_dir: Path) -> tuple[str, int]:
    """Return (mypy's report, exit status) for the copied host modules, under pyproject's
    config."""
    config = str(ROOT / "pyproject.toml")
    argv = ["--config-file", config, "--cache-dir", str(cache_dir), "--no-error-summary"]
    stdout, stderr, status = api.run([*argv, str(host)])
    return stdout + stderr, status


def test_the_host_modules_as_they_are_pass(tmp_path: Path, cache_dir: Path) -> None:
    report, status = run_mypy(copy_host(tmp_path), cache_dir)
    assert status == 0, report


def test_a_wrong_type_in_an_op_fails_mypy(tmp_path: Path, cache_dir: Path) -> None:
    host = copy_host(tmp_path)
    op = host / OP_MODULE
    source = op.read_text()
    assert source.count(ANCHOR) == 1, "the anchor line moved: pick another in " + OP_MODULE
    op.write_text(source.replace(ANCHOR, ANCHOR + BAD_LINE))
    line = source[: source.index(ANCHOR)].count("\n") + 2
    report, status = run_mypy(host, cache_dir)
    assert status == 1, report
    assert f"{OP_MODULE}:{line}: error: Unsupported operand types for + " in report, report
