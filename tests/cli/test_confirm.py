"""Before changing more than 10 hosts from a terminal, push and rollback list what they
will change (every host by name, and the patchset or backup) and ask; no is exit 2 with
nothing contacted. Without a terminal (CI) or with --yes they never ask."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from ddtree_deploy.cli import app
from ddtree_deploy.cli.confirm import CONFIRM_ABOVE_HOSTS
from tests.support import make_patchset

HOSTS = [f"gpu-{i:02}" for i in range(CONFIRM_ABOVE_HOSTS + 1)]


@pytest.fixture
def inv(tmp_path: Path) -> Path:
    """Eleven hosts whose SSH port refuses at once (a connect fails fast, changes nothing)."""
    path = tmp_path / "inv.toml"
    path.write_text(
        "".join(
            f'[hosts.{h}]\naddress = "127.0.0.{i + 1}"\nport = 1\n' for i, h in enumerate(HOSTS)
        )
    )
    return path


def run(*args: str, stdin: str | None = None) -> tuple[int, str]:
    done = CliRunner().invoke(app, list(args), input=stdin)
    return done.exit_code, done.stderr


def on_a_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("ddtree_deploy.cli.confirm.stdin_is_terminal", lambda: True)


def test_push_lists_the_hosts_and_the_patchset_before_asking(inv, tmp_path, monkeypatch):
    on_a_terminal(monkeypatch)
    patchsets = make_patchset(tmp_path)
    args = ["push", "-i", str(inv), "--all", "-p", "ddtree@1.0.0", "--patchsets-dir"]
    code, err = run(*args, str(patchsets), stdin="n\n")
    assert code == 2, err
    assert f"push will change {len(HOSTS)} host(s): patchset ddtree@1.0.0" in err
    assert "hosts: " + ", ".join(HOSTS) in err
    assert err.index("hosts: ") < err.index(f"push on {len(HOSTS)} hosts?")
    assert "aborted: nothing changed" in err


def test_rollback_lists_the_hosts_and_the_backup_before_asking(inv, monkeypatch):
    on_a_terminal(monkeypatch)
    code, err = run("rollback", "-i", str(inv), "--all", "--to", "D1", stdin="n\n")
    assert code == 2, err
    assert "rollback will change 11 host(s): each host gets backup D1 back" in err
    assert "hosts: " + ", ".join(HOSTS) in err


def test_ten_hosts_or_no_terminal_are_not_asked(inv, monkeypatch):
    """Controls: no listing, no question (the run goes on to connect, and fails there)."""
    code, err = run("rollback", "-i", str(inv), "--all", "--to", "D1", "--parallel", "64")
    assert "will change" not in err and code != 0
    on_a_terminal(monkeypatch)
    code, err = run("rollback", "-i", str(inv), "--limit", "gpu-0*", "--to", "D1", "--all")
    assert "will change" not in err and code != 0
    code, err = run("rollback", "-i", str(inv), "--all", "--to", "D1", "--yes")
    assert "will change" not in err and code != 0
