"""Every `ddtree-deploy ...` line the README and the quickstart show is a real command with
real options: parsed against the Typer app (subcommands and option names, not values)."""

from __future__ import annotations

import re
import shlex
from typing import Any

import pytest
import typer

from ddtree_deploy.cli import app
from tests.support import REPO

PAGES = ["README.md", "docs/quickstart.md"]


def shown_commands(text: str) -> list[str]:
    """The `ddtree-deploy` lines of a page's sh fences, comments dropped."""
    lines = []
    for block in re.findall(r"```sh\n(.*?)```", text, flags=re.S):
        for line in block.splitlines():
            line = line.split(" # ", 1)[0].split("  #", 1)[0].strip()
            if line.startswith("ddtree-deploy "):
                lines.append(line)
    return lines


def check_command(root: Any, line: str) -> list[str]:
    """The problems of one shown line: an unknown subcommand or option. `a|b` means either
    subcommand (an option need be known to one of them); `[...]` marks optional parts
    (checked as if given)."""
    words = shlex.split(line.replace("[", " ").replace("]", " "))[1:]
    problems: list[str] = []
    commands: list[Any] = [root]
    known = _options(root) | {"--help"}
    for word in words:
        if word.startswith("-"):
            name = word.split("=")[0]
            if not any(name in _options(c) | known for c in commands):
                problems.append(f"{line}: unknown option {name}")
            continue
        groups = [c for c in commands if hasattr(c, "commands")]  # a group
        if groups and not word.isupper():
            found = [g.commands.get(alt) for g in groups for alt in word.split("|")]
            if None in found:
                problems.append(f"{line}: unknown command {word}")
                return problems
            commands = [c for c in found if c is not None]
    return problems


def _options(command: Any) -> set[str]:
    return {o for p in command.params for o in (*p.opts, *p.secondary_opts)}


@pytest.mark.parametrize("page", PAGES)
def test_every_shown_command_exists_with_its_options(page):
    root = typer.main.get_command(app)
    shown = shown_commands((REPO / page).read_text(encoding="utf-8"))
    assert shown, page
    problems = [p for line in shown for p in check_command(root, line)]
    assert not problems, problems


def test_the_check_finds_a_wrong_option_and_command():
    root = typer.main.get_command(app)
    assert check_command(root, "ddtree-deploy rollback -H a --to X --force") == []
    assert check_command(root, "ddtree-deploy rollback -H a -p ddtree")  # rollback has no -p
    assert check_command(root, "ddtree-deploy backups list|purge -H a")
