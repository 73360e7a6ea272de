"""The root Typer app: every command declared here, each documented in --help."""

from __future__ import annotations

import typer

from . import deploy, inspect, patchsets

app = typer.Typer(
    name="ddtree-deploy",
    help=(
        "Ship versioned patchsets into an installed SGLang over SSH and prove they work.\n\n"
        "Exit codes: 0 ok, 1 failed and rolled back cleanly, 2 bad input/config (nothing "
        "changed), 3 failed and a host needs attention, 4 host locked by another run."
    ),
    no_args_is_help=True,
    pretty_exceptions_show_locals=False,
    add_completion=False,
)
app.command()(deploy.push)
app.command()(deploy.plan)
app.command()(inspect.smoke)
app.command()(deploy.rollback)
app.command()(deploy.recover)
app.command()(inspect.status)
app.add_typer(inspect.hosts_app, name="hosts")
app.add_typer(inspect.backups_app, name="backups")
app.add_typer(patchsets.patchset_app, name="patchset")
