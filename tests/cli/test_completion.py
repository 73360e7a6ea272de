"""Shell completion: Typer's --install-completion/--show-completion are on, and -H, -g,
--limit and -p complete from the inventory and the patchset store; a completer never raises
(no inventory, a broken one, no patchsets dir: no completions, no traceback)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from ddtree_deploy.cli import app
from ddtree_deploy.cli.complete import (
    complete_groups,
    complete_hosts,
    complete_limit,
    complete_patchsets,
)
from tests.support import REPO, make_patchset

INVENTORY = """
[hosts.gpu-a]
address = "10.0.0.1"
groups = ["prod"]
[hosts.gpu-b]
address = "10.0.0.2"
groups = ["prod", "canary"]
[hosts.cpu-1]
address = "10.0.0.3"
"""


@pytest.fixture
def inv(tmp_path: Path) -> Path:
    path = tmp_path / "inv.toml"
    path.write_text(INVENTORY)
    return path


def complete(line: str, env: dict[str, str] | None = None) -> list[str]:
    """What the shell gets for the command line `line` (zsh's protocol, as Typer speaks it)."""
    full = {"_DDTREE_DEPLOY_COMPLETE": "complete_zsh", "_TYPER_COMPLETE_ARGS": line, **(env or {})}
    done = CliRunner().invoke(app, [], env=full, prog_name="ddtree-deploy")
    assert done.exit_code == 0, done.output
    text = done.stdout.strip()
    if not text.startswith("_arguments"):
        return []  # `_files`: nothing of ours to offer
    body = text.split("((", 1)[1].rsplit("))", 1)[0]
    return [item.strip().strip('"').split(":")[0] for item in body.split("\n") if item.strip()]


def test_hosts_complete_from_the_inventory_given_before_or_after_the_command(inv):
    assert complete(f"ddtree-deploy -i {inv} push -H gpu") == ["gpu-a", "gpu-b"]
    assert complete(f"ddtree-deploy status -i {inv} -H ") == ["gpu-a", "gpu-b", "cpu-1"]
    env = {"DDTREE_DEPLOY_INVENTORY": str(inv)}
    assert complete("ddtree-deploy rollback --host c", env) == ["cpu-1"]


def test_groups_and_limit_complete(inv):
    assert complete(f"ddtree-deploy push -i {inv} -g ") == ["canary", "prod"]
    assert complete(f"ddtree-deploy push -i {inv} --limit gpu-a,g") == [
        "gpu-a,gpu-a",
        "gpu-a,gpu-b",
    ]


def test_patchsets_complete_as_name_at_version(tmp_path):
    patchsets = make_patchset(tmp_path, lock=False)
    make_patchset(tmp_path, lock=False, version="1.0.10")
    make_patchset(tmp_path, lock=False, version="1.0.9")
    line = f"ddtree-deploy push --patchsets-dir {patchsets} -p ddtree@"
    assert complete(line) == ["ddtree@1.0.0", "ddtree@1.0.9", "ddtree@1.0.10"]
    env = {"DDTREE_DEPLOY_PATCHSETS": str(patchsets)}
    assert complete("ddtree-deploy plan -p dd", env)[:2] == ["ddtree", "ddtree@1.0.0"]
    assert complete("ddtree-deploy export oci -p ddtree@1.0.1", env) == ["ddtree@1.0.10"]


def test_completers_never_raise(tmp_path):
    broken = tmp_path / "broken.toml"
    broken.write_text("[hosts.x\n")
    for line in (
        f"ddtree-deploy push -i {tmp_path / 'none.toml'} -H ",
        f"ddtree-deploy push -i {broken} -H ",
        f"ddtree-deploy push -i {broken} -g ",
        f"ddtree-deploy push -i {broken} --limit a,",
        f"ddtree-deploy push --patchsets-dir {tmp_path / 'none'} -p ",
    ):
        assert complete(line) == [], line


class NoContext:
    """A context whose every attribute read fails: what a completer must survive."""

    def __getattr__(self, name: str) -> object:
        raise RuntimeError(f"boom: {name}")


@pytest.mark.parametrize(
    "completer", [complete_hosts, complete_groups, complete_limit, complete_patchsets]
)
def test_a_completer_returns_nothing_on_any_error(completer):
    assert completer(NoContext(), "x") == []


def test_install_and_show_completion_are_offered():
    done = CliRunner().invoke(app, ["--help"])
    assert "--install-completion" in done.stdout and "--show-completion" in done.stdout
    # `--show-completion` detects the shell from the parent processes (shellingham): under a
    # CI runner or a detached job there is none ("Shell  not supported.", exit 1), so the
    # shell is named, with Typer's own switch that makes the option take it.
    code = (
        "from typer.testing import CliRunner\n"
        "from ddtree_deploy.cli import app\n"
        "r = CliRunner().invoke(app, ['--show-completion', 'bash'], prog_name='ddtree-deploy')\n"
        "print('exit', r.exit_code)\n"
        "print(r.stdout)\n"
    )
    env = {**os.environ, "_TYPER_COMPLETE_TEST_DISABLE_SHELL_DETECTION": "1"}
    shown = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                           cwd=REPO, env=env, stdin=subprocess.DEVNULL, timeout=120)  # fmt: skip
    assert shown.stdout.startswith("exit 0"), shown.stdout + shown.stderr
    assert "_DDTREE_DEPLOY_COMPLETE" in shown.stdout
