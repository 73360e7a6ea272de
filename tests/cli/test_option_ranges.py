"""Every numeric option of every command has a checked range; out of range is exit 2 before
any host (`--lock-ttl 0` once made the host lock stale at once: another run took it)."""

from __future__ import annotations

from typing import Any

import pytest
import typer.main
from typer.testing import CliRunner

from ddtree_deploy.cli import app


def every_option() -> list[tuple[str, Any]]:
    """(command path, option) for every option of every command, groups walked (Typer's own
    Click: options are TyperOption, their Python type in `type_descriptor`)."""
    found: list[tuple[str, Any]] = []

    def walk(command: Any, path: str) -> None:
        found.extend((path, p) for p in command.params if p.param_type_name == "option")
        for name, sub in getattr(command, "commands", {}).items():
            walk(sub, f"{path} {name}".strip())

    walk(typer.main.get_command(app), "")
    return found


def test_every_numeric_option_has_a_lower_bound() -> None:
    numeric = [
        (path, o) for path, o in every_option() if o.type_descriptor.annotation in (int, float)
    ]
    assert {o.opts[0] for _, o in numeric} >= {"--lock-ttl", "--parallel", "--canary"}
    assert [f"{path} {o.opts[0]}" for path, o in numeric if o.min is None] == []


@pytest.mark.parametrize(
    ("args", "named"),
    [
        (["--lock-ttl", "0"], "--lock-ttl"),
        (["--lock-ttl", "-5"], "--lock-ttl"),
        (["--lock-ttl", "59"], "--lock-ttl"),
        (["--lock-ttl", "1e9"], "--lock-ttl"),
        (["--parallel", "0"], "--parallel"),
        (["--parallel", "5000"], "--parallel"),
        (["--keep-backups", "0"], "--keep-backups"),
        (["--canary", "-1"], "--canary"),
    ],
)
def test_out_of_range_is_exit_2_before_any_host(args: list[str], named: str, tmp_path) -> None:
    inv = tmp_path / "inv.toml"  # a host nobody listens on: parsing must stop first
    inv.write_text('[hosts.x]\naddress = "127.0.0.1"\nport = 1\n')
    done = CliRunner().invoke(app, ["push", "-i", str(inv), "--all", *args], env={"COLUMNS": "200"})
    assert done.exit_code == 2, done.output
    assert named in done.output


def test_the_bounds_themselves_are_accepted(tmp_path) -> None:
    """Negative control of the refusals: 60 s and 1024 pass parsing (the run then stops at
    the patchset, still before any host)."""
    inv = tmp_path / "inv.toml"
    inv.write_text('[hosts.x]\naddress = "127.0.0.1"\nport = 1\n')
    args = ["push", "-i", str(inv), "--all", "-p", "nosuch", "--patchsets-dir", str(tmp_path)]
    done = CliRunner().invoke(app, [*args, "--lock-ttl", "60", "--parallel", "1024"])
    assert done.exit_code == 2 and "no patchset named 'nosuch'" in done.output, done.output
