"""The root Typer app: the shared options (root callback) and every command, mounted here."""

from __future__ import annotations

import typer

from . import (
    backups,
    export,
    gate,
    history,
    hosts,
    patchset_port,  # noqa: F401  (adds `patchset port|diff` to patchset_app)
    patchsets,
    plan,
    push,
    recover,
    rollback,
    smoke,
    status,
)
from .command import host_command
from .context import RunContext
from .help import help_width, readable
from .version import VersionOpt

app = typer.Typer(
    name="ddtree-deploy",
    help=(
        "Ship versioned patchsets into an installed SGLang over SSH and prove they work.\n\n"
        "Exit codes: 0 ok, 1 failed and rolled back cleanly, 2 bad input/config (nothing "
        "changed), 3 failed and a host needs attention, 4 host locked by another run."
    ),
    no_args_is_help=True,
    pretty_exceptions_show_locals=False,
    add_completion=True,  # --install-completion, --show-completion (cli/complete.py)
    context_settings=help_width(),
)


@app.callback()
@host_command
def root(run: RunContext, version: VersionOpt = False) -> None:
    """Shared options given before the command name; `host_command` puts them on ctx.obj.
    `--version` prints and exits while the command line is parsed (cli/version.py)."""


app.command()(push.push)
app.command()(plan.plan)
app.command()(smoke.smoke)
app.command()(rollback.rollback)
app.command()(recover.recover)
app.command()(status.status)
app.command()(gate.gate)
app.command()(history.history)
app.add_typer(hosts.hosts_app, name="hosts")
app.add_typer(backups.backups_app, name="backups")
app.add_typer(export.export_app, name="export")
app.add_typer(patchsets.patchset_app, name="patchset")
readable(app)  # last: every command and sub-app is mounted (cli/help.py)
