"""`ddtree-deploy --version`: the tool's version, python's, paramiko's and the sglang
releases the patchsets target (what a bug report needs), on stdout, exit 0, no command."""

from __future__ import annotations

import importlib.metadata
import platform

from typer.testing import CliRunner

from ddtree_deploy import __version__
from ddtree_deploy.cli import app
from tests.support import make_patchset


def version(env: dict[str, str] | None = None) -> tuple[int, str]:
    done = CliRunner().invoke(app, ["--version"], env=env)
    return done.exit_code, done.stdout


def test_version_names_the_tool_python_paramiko_and_the_targets(tmp_path):
    patchsets = make_patchset(tmp_path, lock=False)
    code, out = version({"DDTREE_DEPLOY_PATCHSETS": str(patchsets)})
    assert code == 0, out
    lines = out.splitlines()
    assert lines[0] == f"ddtree-deploy {__version__}"
    assert lines[1].startswith(f"python {platform.python_version()} ")
    assert lines[2] == f"paramiko {importlib.metadata.version('paramiko')}"
    assert lines[3] == f"patchsets: {patchsets}"
    assert lines[4:] == ["sglang 0.5.13.post1: ddtree@1.0.0"]


def test_the_checkouts_patchsets_list_each_target_once_oldest_first():
    code, out = version()
    assert code == 0, out
    targets = [line for line in out.splitlines() if line.startswith("sglang ")]
    assert [t.split(":")[0] for t in targets] == ["sglang 0.5.13.post1", "sglang 0.5.23"]
    assert "ddtree@1.1.0" in targets[0] and "ddtree@2.0.0" in targets[1]


def test_version_without_patchsets_says_why_and_still_exits_0(tmp_path):
    code, out = version({"DDTREE_DEPLOY_PATCHSETS": str(tmp_path / "none")})
    assert code == 0, out
    assert "patchsets: none read" in out and "no such directory" in out
    empty = tmp_path / "empty"
    empty.mkdir()
    code, out = version({"DDTREE_DEPLOY_PATCHSETS": str(empty)})
    assert code == 0 and f"patchsets: none in {empty}" in out


def test_version_is_in_the_root_help():
    done = CliRunner().invoke(app, ["--help"])
    assert "--version" in done.stdout
