"""`patchset list|lock|verify|new`: local only but for `new --from-host` (one read-only
request). `port` and `diff` live in patchset_port.py."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.markup import escape
from rich.table import Table

from ddtree_deploy.errors import PatchsetError
from ddtree_deploy.patchset import (
    STORE_DIR,
    Patchset,
    default_patchsets_dir,
    list_patchsets,
    resolve_patchset,
    verify_patchset,
    write_lock,
)

from .command import local_command
from .context import InventoryOpt, RunContext, data_console
from .options import PatchsetsDirOpt
from .wheels import CACHE_HELP, fetch_wheels

if TYPE_CHECKING:  # `new` and `dedupe` import their machinery when they run (start-up time)
    from ddtree_deploy.patchset.author import CaptureSource, FileRow

patchset_app = typer.Typer(
    help=f"Patchsets on disk: list, lock, verify, new, port, diff.\n\n{CACHE_HELP}",
    no_args_is_help=True,
)
RefArg = Annotated[
    str,
    typer.Argument(metavar="NAME[@VERSION]", help="NAME@VERSION, or NAME for its highest version."),
]


JsonFlag = Annotated[
    bool,
    typer.Option("--json", help="JSON on stdout (as the root --json): one object a line."),
]


@patchset_app.command("list")
@local_command
def list_patchsets_cmd(
    run: RunContext, as_json: JsonFlag = False, patchsets_dir: PatchsetsDirOpt = None
) -> None:
    """Every patchset with its target and lock state (a table on stdout, or JSON Lines)."""
    found = list_patchsets(patchsets_dir or default_patchsets_dir())
    if as_json or run.output.json_lines:
        for ps in found:
            sys.stdout.write(json.dumps(patchset_record(ps)) + "\n")
        return
    table = Table(title="patchsets")
    for col in ("patchset", "target", "files", "lock"):
        table.add_column(col)
    for ps in found:
        target = f"{ps.spec.target.package}=={ps.spec.target.version}"
        lock_state = "locked" if ps.lock else "-"
        table.add_row(escape(ps.ref), escape(target), str(len(ps.spec.files)), lock_state)
    data_console().print(table)


def patchset_record(ps: Patchset) -> dict[str, object]:
    """One line of `patchset list --json`: what the table shows, and the lock's identity."""
    return {
        "ref": ps.ref,
        "name": ps.spec.name,
        "version": ps.spec.version,
        "target": {"package": ps.spec.target.package, "version": ps.spec.target.version},
        "files": len(ps.spec.files),
        "locked": ps.lock is not None,
        "spec_sha256": None if ps.lock is None else ps.lock.spec_sha256,
        "ported_from": ps.spec.ported_from,
        "description": ps.spec.description,
        "path": str(ps.root),
    }


@patchset_app.command("lock")
@local_command
def lock(
    run: RunContext,
    ref: RefArg,
    force: Annotated[
        bool,
        typer.Option(
            "--force",
            help="Rewrite an existing lock. Only for a version that was never pushed to any "
            "host: a pushed version never changes (make a new one with `patchset new` or "
            "`patchset port`).",
        ),
    ] = False,
    upgrade: Annotated[
        bool,
        typer.Option(
            "--upgrade",
            help="Add the patchset.toml record to a lock written before locks held one; no "
            "file hash changes. Review patchset.toml first: the record pins it as it is.",
        ),
    ] = False,
    patchsets_dir: PatchsetsDirOpt = None,
) -> None:
    """Materialise every file from the pristine pinned wheel and write patchset.lock.json.

    A version that already has a lock is refused (exit 2): a locked version never changes.
    """
    from ddtree_deploy.patchset.lock import record_spec

    if force and upgrade:
        raise PatchsetError("give --force or --upgrade, not both")
    ps = resolve_patchset(patchsets_dir or default_patchsets_dir(), ref)
    if upgrade:
        upgraded = record_spec(ps)
        message = f"upgraded the lock of {ps.ref}: patchset.toml recorded ({upgraded.spec_sha256})"
        run.console.print(message, markup=False)
        return
    fetch_wheels(run, ps.spec.target)
    written = write_lock(ps, replace=force)
    message = f"locked {ps.ref}: {len(written.files)} files against {written.wheel}"
    run.console.print(message, markup=False)


@patchset_app.command("verify")
@local_command
def verify(
    run: RunContext, ref: RefArg, as_json: JsonFlag = False, patchsets_dir: PatchsetsDirOpt = None
) -> None:
    """Re-materialise, compare every hash and patchset.toml with the lock, compile the results."""
    from ddtree_deploy.patchset.lock import check_sources

    ps = resolve_patchset(patchsets_dir or default_patchsets_dir(), ref)
    check_sources(ps)  # the lock and patchset.toml first: an edited table needs no download
    fetch_wheels(run, ps.spec.target)
    checked = verify_patchset(ps)
    if as_json or run.output.json_lines:
        record = {"ref": ps.ref, "verified": True, "files": len(checked.files)}
        sys.stdout.write(json.dumps({**record, "spec_sha256": checked.spec_sha256}) + "\n")
        return
    message = f"{escape(ps.ref)}: {len(checked.files)} files match the lock"
    run.console.print(f"[green]verified[/] {message}")


IGNORED_ROWS_SHOWN = 20  # a venv's site-packages has hundreds of __pycache__/ dirs


@patchset_app.command("new")
@local_command
def new(
    run: RunContext,
    ref: Annotated[
        str, typer.Argument(metavar="NAME@VERSION", help="NAME@VERSION of the new patchset.")
    ],
    target: Annotated[
        str,
        typer.Option(
            "--target", metavar="PKG==VERSION", help="The pinned base, e.g. sglang==0.5.13.post1."
        ),
    ],
    from_tree: Annotated[
        Path | None,
        typer.Option(
            "--from-tree",
            metavar="DIR",
            help="A folder holding the edited sglang/ (a venv's site-packages, a fork's "
            "python/), or the sglang package itself.",
        ),
    ] = None,
    from_diff: Annotated[
        Path | None,
        typer.Option(
            "--from-diff", metavar="FILE", help="A unified diff (git diff, diff -ruN) of the edit."
        ),
    ] = None,
    from_host: Annotated[
        str | None,
        typer.Option(
            "--from-host",
            metavar="HOST",
            help="An inventory host whose installed sglang was edited in place: only the "
            "files that differ from its RECORD are fetched; the host is not changed.",
        ),
    ] = None,
    inventory: InventoryOpt = None,
    strip: Annotated[
        int | None,
        typer.Option(
            "--strip",
            min=0,
            metavar="N",
            help="With --from-diff: leading path components to drop (as patch -pN); default "
            "one, then python/.",
        ),
    ] = None,
    like: Annotated[
        str | None,
        typer.Option(
            "--like",
            metavar="NAME@VERSION",
            help="Copy [smoke], [serve], [lossless], [gate] and their data from this one.",
        ),
    ] = None,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Print the file table only; write nothing.")
    ] = False,
    description: Annotated[
        str, typer.Option("--description", metavar="TEXT", help="patchset.toml's description.")
    ] = "",
    patchsets_dir: PatchsetsDirOpt = None,
) -> None:
    """Capture an edit as a new locked patchset: diffs against the pristine pinned wheel."""
    from ddtree_deploy.patchset.author import NewPatchset, WrittenPatchset, new_patchset

    source = _capture_source(run, from_tree, from_diff, from_host, strip, inventory, target)
    base = patchsets_dir or default_patchsets_dir()
    request = NewPatchset.parse(base, ref, target, description, like)
    fetch_wheels(run, request.target)  # says on stderr what it downloads
    done = new_patchset(request, source, dry_run)
    if not isinstance(done, WrittenPatchset):
        run.console.print(_file_table(done.rows, f"{request.ref} (dry run)"))
        run.console.print("dry run: nothing written", markup=False)
        return
    run.console.print(_file_table(done.plan.rows, request.ref))
    shown = done.root.relative_to(base.parent) if base.is_absolute() else done.root
    run.console.print(f"wrote {shown} (locked, {len(done.lock.files)} files)", markup=False)


def _capture_source(
    run: RunContext,
    from_tree: Path | None,
    from_diff: Path | None,
    from_host: str | None,
    strip: int | None,
    inventory: Path | None,
    target: str,
) -> CaptureSource:
    """The one source `patchset new` was given (--from-tree, --from-diff or --from-host),
    as a function of the pristine wheel; raises PatchsetError for none, several, or a flag
    that goes with another source (--strip, --inventory)."""
    from ddtree_deploy.patchset.author import parse_target
    from ddtree_deploy.patchset.capture import capture_from_diff, capture_from_tree

    from .from_host import capture_inventory_host

    given = {"--from-tree": from_tree, "--from-diff": from_diff, "--from-host": from_host}
    named = [flag for flag, value in given.items() if value is not None]
    if len(named) != 1:
        raise PatchsetError(
            "give exactly one source, --from-tree DIR, --from-diff FILE or --from-host HOST "
            f"({' and '.join(named) or 'none'} given)"
        )
    if strip is not None and from_diff is None:
        raise PatchsetError("--strip goes with --from-diff")
    if inventory is not None and from_host is None:
        raise PatchsetError("--inventory goes with --from-host")
    pinned = parse_target(target)
    package = pinned.package
    if from_tree is not None:
        tree = from_tree
        return lambda wheel: capture_from_tree(tree, wheel, package)
    if from_diff is not None:
        diff = from_diff
        return lambda wheel: capture_from_diff(diff, strip, wheel, package)
    host, hosts = str(from_host), inventory or run.options.inventory  # -i before `patchset`
    return lambda wheel: capture_inventory_host(run.console, hosts, host, pinned)


def _file_table(rows: list[FileRow], title: str) -> Table:
    """The file table of `patchset new`: path, kind, lines added and removed."""
    table = Table(title=escape(title))
    for col, justify in (("path", "left"), ("kind", "left"), ("+", "right"), ("-", "right")):
        table.add_column(col, justify=justify)  # type: ignore[arg-type]
    ignored = [row for row in rows if row.kind == "ignored"]
    for row in [row for row in rows if row.kind != "ignored"] + ignored[:IGNORED_ROWS_SHOWN]:
        counts = ("", "") if row.kind == "ignored" else (str(row.plus_lines), str(row.minus_lines))
        style = {"changed": "yellow", "added": "green", "ignored": "dim"}[row.kind]
        table.add_row(escape(row.path), f"[{style}]{row.kind}[/]", *counts)
    if len(ignored) > IGNORED_ROWS_SHOWN:
        table.add_row(f"... {len(ignored) - IGNORED_ROWS_SHOWN} more", "[dim]ignored[/]", "", "")
    return table


@patchset_app.command("dedupe")
@local_command
def dedupe(
    run: RunContext,
    name: Annotated[
        str, typer.Argument(metavar="NAME", help="The patchset NAME whose versions to dedupe.")
    ],
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Print the moves only.")] = False,
    patchsets_dir: PatchsetsDirOpt = None,
) -> None:
    """Move source files several versions hold byte for byte into NAME/shared/ (locks unchanged)."""
    from ddtree_deploy.patchset.dedupe import apply_dedupe, plan_dedupe

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
