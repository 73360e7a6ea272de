"""Help that reads right: no `<bool>` after a flag, a real metavar after every option that
takes a value, and help text shown as written (no Rich markup, so `[groups.NAME]` and
`[env ...]` stay in the text instead of being eaten as style tags).

`readable(app)` walks a Typer app and its sub-apps once, after every command is mounted
(cli/app.py), turning markup off and giving each command the classes below. Options that
name their own metavar (`NAME@VERSION`, `HOST`, `N|P%`) keep it; any other gets one from its
type (`FILE`, `N`, `TEXT`) instead of Typer's `<path>`/`<int range>`/`<str>`.
"""

from __future__ import annotations

import inspect
import shutil
import sys
from pathlib import Path
from typing import Any

import typer
from typer.core import TyperCommand, TyperGroup

from .examples import examples_block

_METAVAR_BY_TYPE: dict[Any, str] = {Path: "PATH", int: "N", float: "NUMBER", str: "TEXT"}


def _readable_params(params: list[Any]) -> list[Any]:
    """``params`` with a flag's metavar emptied and every other option's metavar set."""
    for param in params:
        if param.param_type_name != "option" or param.metavar is not None:
            continue
        if param.is_flag:
            param.metavar = ""  # a flag takes no value: show none
            continue
        descriptor = getattr(param, "type_descriptor", None)
        kind = getattr(descriptor, "annotation", None)
        if kind in _METAVAR_BY_TYPE:
            param.metavar = _METAVAR_BY_TYPE[kind]
    return params


class ReadableCommand(TyperCommand):
    """A command whose help shows flags bare and values by metavar (see module)."""

    def get_params(self, ctx: Any) -> list[Any]:
        return _readable_params(list(super().get_params(ctx)))


class ReadableGroup(TyperGroup):
    """A command group whose own options (the root's shared ones, --help) read the same."""

    def get_params(self, ctx: Any) -> list[Any]:
        return _readable_params(list(super().get_params(ctx)))


UNWRAPPED_COLUMNS = 10_000  # help piped into a file or a pager: one line per paragraph


def help_width() -> dict[str, int]:
    """Click context settings for help: the terminal's width on a terminal (Click's own
    cap is 80 columns), unwrapped when stdout is not one."""
    columns = shutil.get_terminal_size().columns if sys.stdout.isatty() else UNWRAPPED_COLUMNS
    return {"terminal_width": columns, "max_content_width": columns}


def readable(app: typer.Typer, path: str = "") -> typer.Typer:
    """Return ``app`` with markup off and the readable classes on it, its commands and its
    sub-apps (recursively), each command's help ending with its examples (cli/examples.py);
    call once every command is mounted. ``path``: the sub-app's name (`patchset`)."""
    app.rich_markup_mode = None
    app.info.cls = ReadableGroup
    for command in app.registered_commands:
        command.cls = ReadableCommand
        name = command.name or (command.callback.__name__ if command.callback else "")
        text = command.help or inspect.getdoc(command.callback) or ""
        command.help = text + examples_block(f"{path} {name}".strip())
    for group in app.registered_groups:
        if group.typer_instance is not None:
            readable(group.typer_instance, f"{path} {group.name}".strip())
            group.cls = ReadableGroup
    return app
