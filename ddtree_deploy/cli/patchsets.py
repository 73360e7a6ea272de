"""`patchset list|lock|verify`: local only, no host is contacted."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.table import Table

from ddtree_deploy.patchset import (
    default_patchsets_dir,
    list_patchsets,
    resolve_patchset,
    verify_patchset,
    write_lock,
)

from .common import PatchsetsDirOpt, console, handle_config_errors

patchset_app = typer.Typer(help="Patchsets on disk: list, lock, verify.", no_args_is_help=True)
RefArg = Annotated[str, typer.Argument(help="NAME@VERSION, or NAME for its highest version.")]


@patchset_app.command("list")
@handle_config_errors
def list_cmd(patchsets_dir: PatchsetsDirOpt = None) -> None:
    """Every patchset with its target and lock state."""
    table = Table(title="patchsets")
    for col in ("patchset", "target", "files", "lock"):
        table.add_column(col)
    for ps in list_patchsets(patchsets_dir or default_patchsets_dir()):
        target = f"{ps.spec.target.package}=={ps.spec.target.version}"
        table.add_row(ps.ref, target, str(len(ps.spec.files)), "locked" if ps.lock else "-")
    console.print(table)


@patchset_app.command("lock")
@handle_config_errors
def lock_cmd(ref: RefArg, patchsets_dir: PatchsetsDirOpt = None) -> None:
    """Materialise every file from the pristine pinned wheel and write patchset.lock.json."""
    ps = resolve_patchset(patchsets_dir or default_patchsets_dir(), ref)
    lock = write_lock(ps)
    console.print(f"locked {ps.ref}: {len(lock.files)} files against {lock.wheel}")


@patchset_app.command("verify")
@handle_config_errors
def verify_cmd(ref: RefArg, patchsets_dir: PatchsetsDirOpt = None) -> None:
    """Re-materialise, compare every hash with the lock, compile the results."""
    ps = resolve_patchset(patchsets_dir or default_patchsets_dir(), ref)
    lock = verify_patchset(ps)
    console.print(f"[green]verified[/] {ps.ref}: {len(lock.files)} files match the lock")
