"""Help reads right: flags show no `<bool>`, options show real metavars (NAME[@VERSION],
HOST, N|P%) instead of Typer's `<str>`/`<path>`, text such as `[groups.NAME]` and `[env
...]` is shown as written (Rich markup once ate it), every option has help, and help piped
is not wrapped at 80 columns. Every command is walked, in a real process for the width."""

from __future__ import annotations

import re
from typing import Any

import pytest
import typer.main
from typer.testing import CliRunner

from ddtree_deploy.cli import app
from ddtree_deploy.cli.examples import EXAMPLES
from tests.support import run_cli


def every_command() -> list[tuple[list[str], Any]]:
    found: list[tuple[list[str], Any]] = []

    def walk(command: Any, path: list[str]) -> None:
        found.append((path, command))
        for name, sub in getattr(command, "commands", {}).items():
            walk(sub, [*path, name])

    walk(typer.main.get_command(app), [])
    return found


COMMANDS = [path for path, _ in every_command()]


@pytest.mark.parametrize("path", COMMANDS, ids=lambda p: " ".join(p) or "root")
def test_help_has_no_type_placeholders_and_keeps_brackets(path: list[str]) -> None:
    done = CliRunner().invoke(app, [*path, "--help"], env={"COLUMNS": "300"})
    assert done.exit_code == 0, done.output
    options = done.output.split("Options:", 1)[-1]
    assert re.findall(r"<(?:bool|str|path|int|float|list\[str\])[^>]*>", options) == []
    assert "\\[" not in done.output  # no markup escape shown


def test_brackets_and_defaults_are_shown_as_written() -> None:
    text = CliRunner().invoke(app, ["push", "--help"], env={"COLUMNS": "300"}).output
    flat = " ".join(text.split())
    assert "of a restart group ([groups.NAME] members) change" in flat
    assert "[hosts.NAME.smoke] isolated_imports = true" in flat
    assert "Where patchsets live [env DDTREE_DEPLOY_PATCHSETS]." in flat
    assert "[default: ddtree]" in flat and "[default: 3600.0; 60.0<=x<=604800.0]" in flat
    for shown in ("-p, --patchset NAME[@VERSION]", "-H, --host HOST", "--max-fail N|P%"):
        assert shown in flat
    assert re.search(r"^\s+--strict\s+With -p NAME", text, flags=re.M)  # a bare flag


def test_every_option_has_help() -> None:
    missing = [
        f"{' '.join(path)} {p.opts[0]}"
        for path, command in every_command()
        for p in command.params
        if p.param_type_name == "option" and not (p.help or "").strip()
    ]
    assert missing == []


def test_help_piped_is_not_wrapped() -> None:
    done = run_cli("push", "--help", env={"COLUMNS": "80"})  # stdout is a pipe
    assert done.returncode == 0
    line = next(ln for ln in done.stdout.splitlines() if "--isolated-imports" in ln)
    assert "isolated_imports = true." in line and len(line) > 80


def test_every_command_ends_with_examples_of_itself() -> None:
    leaves = [(path, c) for path, c in every_command() if not getattr(c, "commands", None)]
    assert len(leaves) == len(EXAMPLES)  # every command, each with its block
    for path, _ in leaves:
        text = CliRunner().invoke(app, [*path, "--help"]).output
        block = text.split("Examples:\n", 1)
        assert len(block) == 2, path
        lines = [ln.strip() for ln in block[1].split("\n\n", 1)[0].splitlines()]
        assert any(ln.startswith(f"ddtree-deploy {' '.join(path)} ") for ln in lines), path
