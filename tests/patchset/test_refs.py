"""Patchset references and where patchsets live: an unknown version names those that exist,
`NAME@` and `@VERSION` are refused, a missing patchsets directory is an error (it once read
as an empty table). Local only: CliRunner on the shipped patchsets."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from ddtree_deploy.cli import app
from tests.support import REPO

PATCHSETS = REPO / "patchsets"


def cli(*args: str, env: dict[str, str] | None = None) -> tuple[int, str]:
    done = CliRunner().invoke(app, list(args), env={"COLUMNS": "400", **(env or {})})
    return done.exit_code, " ".join(done.output.split())


def inventory(tmp_path: Path) -> str:
    path = tmp_path / "inv.toml"  # nobody listens: every case must stop before connecting
    path.write_text('[hosts.x]\naddress = "127.0.0.1"\nport = 1\n')
    return str(path)


@pytest.mark.parametrize("command", ["verify", "push"])
def test_an_unknown_version_lists_the_versions_that_exist(tmp_path: Path, command: str) -> None:
    args = ["patchset", "verify", "ddtree@9"] if command == "verify" else [
        "push", "-i", inventory(tmp_path), "--all", "-p", "ddtree@9"
    ]  # fmt: skip
    code, output = cli(*args, "--patchsets-dir", str(PATCHSETS))
    assert code == 2, output
    assert "patchset 'ddtree@9' not found; ddtree has 1.0.0, 1.1.0, 1.1.9, 1.1.10" in output
    assert "2.1.2" in output


def test_an_unknown_name_lists_the_names(tmp_path: Path) -> None:
    code, output = cli("patchset", "verify", "ddtre", "--patchsets-dir", str(PATCHSETS))
    assert code == 2 and "no patchset named 'ddtre'; patchsets here: ddtree" in output


@pytest.mark.parametrize("ref", ["ddtree@", "@1.1.0", "@"])
def test_a_ref_without_name_or_version_is_an_error(tmp_path: Path, ref: str) -> None:
    for args in (
        ["patchset", "verify", ref],
        ["push", "-i", inventory(tmp_path), "--all", "-p", ref],
    ):
        code, output = cli(*args, "--patchsets-dir", str(PATCHSETS))
        assert code == 2, (args, output)
        assert f"patchset {ref!r}: give NAME@VERSION, or NAME" in output


def test_a_missing_patchsets_directory_is_an_error(tmp_path: Path) -> None:
    missing = tmp_path / "nope"
    code, output = cli("patchset", "list", env={"DDTREE_DEPLOY_PATCHSETS": str(missing)})
    assert code == 2 and f"$DDTREE_DEPLOY_PATCHSETS={missing}: no such directory" in output
    code, output = cli("patchset", "list", "--patchsets-dir", str(missing))
    assert code == 2 and f"{missing}: patchsets directory not found" in output
    code, output = cli("push", "-i", inventory(tmp_path), "--all", "--patchsets-dir", str(missing))
    assert code == 2 and "patchsets directory not found" in output


def test_the_controls_resolve(tmp_path: Path) -> None:
    """Negative control: the same commands with a good ref and directory succeed."""
    code, output = cli("patchset", "verify", "ddtree@1.1.0", "--patchsets-dir", str(PATCHSETS))
    assert code == 0, output
    code, output = cli("patchset", "list", env={"DDTREE_DEPLOY_PATCHSETS": str(PATCHSETS)})
    assert code == 0 and "ddtree@2.1.2" in output
