"""`patchset list|lock|verify`: local only, no host is contacted."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.markup import escape
from rich.table import Table

from ddtree_deploy.errors import PatchsetError
from ddtree_deploy.patchset import (
    STORE_DIR,
    apply_dedupe,
    default_patchsets_dir,
    list_patchsets,
    plan_dedupe,
    resolve_patchset,
    verify_patchset,
    write_lock,
)

from .command import local_command
from .context import RunContext
from .options import PatchsetsDirOpt

patchset_app = typer.Typer(help="Patchsets on disk: list, lock, verify.", no_args_is_help=True)
RefArg = Annotated[str, typer.Argument(help="NAME@VERSION, or NAME for its highest version.")]


@patchset_app.command("list")
@local_command
def list_patchsets_cmd(run: RunContext, patchsets_dir: PatchsetsDirOpt = None) -> None:
    """Every patchset with its target and lock state."""
    table = Table(title="patchsets")
    for col in ("patchset", "target", "files", "lock"):
        table.add_column(col)
    for ps in list_patchsets(patchsets_dir or default_patchsets_dir()):
        target = f"{ps.spec.target.package}=={ps.spec.target.version}"
        lock_state = "locked" if ps.lock else "-"
        table.add_row(escape(ps.ref), escape(target), str(len(ps.spec.files)), lock_state)
    run.console.print(table)


@patchset_app.command("lock")
@local_command
def lock(run: RunContext, ref: RefArg, patchsets_dir: PatchsetsDirOpt = None) -> None:
    """Materialise every file from the pristine pinned wheel and write patchset.lock.json."""
    ps = resolve_patchset(patchsets_dir or default_patchsets_dir(), ref)
    written = write_lock(ps)
    message = f"locked {ps.ref}: {len(written.files)} files against {written.wheel}"
    run.console.print(message, markup=False)


@patchset_app.command("verify")
@local_command
def verify(run: RunContext, ref: RefArg, patchsets_dir: PatchsetsDirOpt = None) -> None:
    """Re-materialise, compare every hash with the lock, compile the results."""
    ps = resolve_patchset(patchsets_dir or default_patchsets_dir(), ref)
    checked = verify_patchset(ps)
    message = f"{escape(ps.ref)}: {len(checked.files)} files match the lock"
    run.console.print(f"[green]verified[/] {message}")


@patchset_app.command("dedupe")
@local_command
def dedupe(
    run: RunContext,
    name: Annotated[str, typer.Argument(help="The patchset NAME whose versions to dedupe.")],
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Print the moves only.")] = False,
    patchsets_dir: PatchsetsDirOpt = None,
) -> None:
    """Move source files several versions hold byte for byte into NAME/shared/ (locks unchanged)."""
    base = patchsets_dir or default_patchsets_dir()
    versions = [p for p in list_patchsets(base) if p.spec.name == name]
    if not versions:
        raise PatchsetError(f"{base}: no patchset named {name!r}")
    plan = plan_dedupe(versions)
    table = Table(title=f"{name}: shared files" + (" (dry run)" if dry_run else ""))
    for col in ("version", "path", "source", "sha256"):
        table.add_column(col)
    for move in plan.moves:
        table.add_row(escape(move.ref), escape(move.path), escape(move.source), move.sha256[:12])
    run.console.print(table)
    for ref in plan.unlocked:
        run.console.print(f"skipped {ref}: no lock (lock it, then dedupe)", markup=False)
    if not dry_run:
        apply_dedupe(versions, plan)
    verb = "would move" if dry_run else "moved"
    store = base / name / STORE_DIR
    run.console.print(f"{verb} {len(plan.moves)} files into {store}; no lock changed", markup=False)
