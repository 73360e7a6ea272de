"""`patchset port` and `patchset diff`: carry a patchset onto another release of its target,
and show what changed between two versions. Local only, no host is contacted. The commands
join `patchset_app` (cli/patchsets.py) when this module is imported (cli/app.py does)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.markup import escape
from rich.table import Table

from ddtree_deploy.patchset import default_patchsets_dir, resolve_patchset

from . import exit_codes
from .command import local_command
from .context import RunContext, data_console
from .options import PatchsetsDirOpt
from .patchsets import RefArg, patchset_app
from .wheels import fetch_wheels

if TYPE_CHECKING:
    from ddtree_deploy.patchset.port_write import PortReport

PORT_STOPPED = exit_codes.ROLLED_BACK  # 1: a conflict or a gone file; no patchset written
_STATUS_STYLE = {
    "clean": "green",
    "merged": "green",
    "carried": "green",
    "resolved": "green",
    "upstream": "cyan",
    "conflict": "bold red",
    "gone": "bold red",
}
_STATUS_NOTE = {
    "clean": "the old diff applies unchanged",
    "merged": "both sides changed it, apart: merged",
    "carried": "a file of ours, copied as it is",
    "resolved": "conflict resolved in the work dir",
    "upstream": "the new release already has this change: entry dropped",
    "conflict": "both sides changed the same lines",
    "gone": "the file does not exist in the new release",
}


@patchset_app.command("port")
@local_command
def port(
    run: RunContext,
    ref: RefArg,
    to: Annotated[
        str,
        typer.Option("--to", metavar="PKG==VERSION", help="The new target, e.g. sglang==0.5.13."),
    ],
    as_version: Annotated[
        str | None,
        typer.Option(
            "--as",
            metavar="NAME@VERSION",
            help="The new version [default: the old one + a local label naming the target, "
            "e.g. 1.0.0+sglang0.5.13].",
        ),
    ] = None,
    resume: Annotated[
        bool, typer.Option("--continue", help="Finish a port whose conflicts you resolved.")
    ] = False,
    work_dir: Annotated[
        Path | None,
        typer.Option(
            "--work-dir",
            metavar="DIR",
            help="Where conflicts go [default: .ddtree-port/NAME@NEW beside the patchsets dir].",
        ),
    ] = None,
    patchsets_dir: PatchsetsDirOpt = None,
) -> None:
    """Three-way merge every file onto another release of the target; write NAME@NEW."""
    from ddtree_deploy.patchset.port import check_port_version, parse_to_arg
    from ddtree_deploy.patchset.port_write import continue_port, port_patchset

    base = patchsets_dir or default_patchsets_dir()
    old = resolve_patchset(base, ref)
    target = parse_to_arg(to, old.spec.target)
    version = check_port_version(as_version) if as_version else None
    step = continue_port if resume else port_patchset
    fetch_wheels(run, old.spec.target, target)
    report = step(base, old, target, version, work_dir)
    _print_port(run, report)
    if report.work_dir is not None:
        again = f"ddtree-deploy patchset port {report.old_ref} --to {to} --continue"
        if as_version:
            again += f" --as {as_version}"
        if work_dir is not None:
            again += f" --work-dir {work_dir}"
        run.console.print("[bold red]conflict[/]: no patchset written. Resolve the markers in")
        run.console.print(f"  {report.work_dir / 'files'}/", markup=False, soft_wrap=True)
        run.console.print("then run:")
        run.console.print(f"  {again}", markup=False, soft_wrap=True)
        raise typer.Exit(PORT_STOPPED)
    if report.written is None:
        run.console.print(
            "[bold red]gone[/]: a patched file no longer exists in "
            f"{escape(to)}; no patchset written (rework it with a new patchset)"
        )
        raise typer.Exit(PORT_STOPPED)
    lock = report.lock
    assert lock is not None
    run.console.print(
        f"[green]ported[/] {escape(report.old_ref)} -> {escape(report.new_ref)}: "
        f"{escape(str(report.written.root))}, {len(lock.files)} files locked against "
        f"{escape(lock.wheel)}, local gate passed",
        soft_wrap=True,
    )


def _print_port(run: RunContext, report: PortReport) -> None:
    from ddtree_deploy.patchset.merge import conflict_starts

    table = Table(title=escape(f"port {report.old_ref} -> {report.new_ref}"))
    for col in ("file", "outcome", "what happened"):
        table.add_column(col)
    for item in report.files:
        style = _STATUS_STYLE[item.status]
        outcome = f"[{style}]{item.status}[/]"
        note = _STATUS_NOTE[item.status]
        if item.status == "conflict" and item.result is not None:
            note += f" (lines {', '.join(map(str, conflict_starts(item.result)))})"
        table.add_row(escape(item.path), outcome, escape(note))
    run.console.print(table)


@patchset_app.command("diff")
@local_command
def diff(
    run: RunContext,
    a: Annotated[str, typer.Argument(metavar="A", help="NAME@VERSION (or NAME) to compare from.")],
    b: Annotated[str, typer.Argument(metavar="B", help="NAME@VERSION (or NAME) to compare to.")],
    as_json: Annotated[bool, typer.Option("--json", help="One JSON object on stdout.")] = False,
    patchsets_dir: PatchsetsDirOpt = None,
) -> None:
    """What changed between two patchsets: their files and each file's result.

    stdout is the patch from A's installed files to B's (`a/PATH`, `b/PATH`), which
    `git apply` or `patch -p1` applies in a site-packages holding A; the file table goes to
    stderr. With --json (here or before `patchset`): one JSON object on stdout instead.
    """
    from rich.syntax import Syntax  # pygments: ~40 ms that only this command needs

    from ddtree_deploy.patchset.compare import diff_patchsets

    base = patchsets_dir or default_patchsets_dir()
    first, second = resolve_patchset(base, a), resolve_patchset(base, b)
    fetch_wheels(run, first.spec.target, second.spec.target)
    found = diff_patchsets(first, second)
    if as_json or run.output.json_lines:
        sys.stdout.write(json.dumps(found.model_dump()) + "\n")
        return
    title = f"{found.a.ref} ({found.a.target}) -> {found.b.ref} ({found.b.target})"
    table = Table(title=escape(title))
    for col in ("file", "change", "kind", "lines"):
        table.add_column(col)
    for item in found.files:
        kinds = f"{item.a_kind or '-'} -> {item.b_kind or '-'}"
        lines = "" if item.change == "same" else f"+{item.added} -{item.removed}"
        table.add_row(escape(item.path), item.change, kinds, lines)
    run.console.print(table)
    patch = "".join(item.diff for item in found.files)
    if (out := data_console()).is_terminal:  # for people: coloured, the terminal's width
        out.print(Syntax(patch, "diff", theme="ansi_dark", word_wrap=True))
    else:  # for git apply / patch: the bytes, never wrapped
        sys.stdout.write(patch)
