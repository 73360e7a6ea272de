"""Rich tables for people: the per-host summary and the facts of `hosts check`."""

from __future__ import annotations

from rich.markup import escape
from rich.table import Table

from ddtree_deploy.results import HostResult, Outcome

_OUTCOME_STYLE = {
    Outcome.OK: "green",
    Outcome.NO_CHANGES: "green",
    Outcome.NOT_STARTED: "dim",
    Outcome.ROLLED_BACK: "yellow",
    Outcome.REFUSED: "red",
    Outcome.NEEDS_ATTENTION: "bold red",
    Outcome.LOCKED: "magenta",
    Outcome.FAILED: "red",
}


def summary_table(title: str, results: list[HostResult]) -> Table:
    table = Table(title=title)
    for col in ("host", "outcome", "version now", "duration", "message"):
        table.add_column(col, overflow="fold")
    for r in results:
        style = _OUTCOME_STYLE[r.outcome]
        table.add_row(
            r.host,
            f"[{style}]{r.outcome.value}[/]",
            r.version_now or "-",
            f"{r.details.get('duration_s', 0):.1f}s",
            r.message,
        )
    return table


def facts_table(results: list[HostResult]) -> Table:
    table = Table(title="hosts check")
    for col in ("host", "python", "sglang", "site-packages", "free", "gpus", "lock", "files"):
        table.add_column(col, overflow="fold")
    for r in results:
        f = r.details
        if "python" not in f:
            table.add_row(r.host, "-", "-", "-", "-", "-", "-", f"[red]{r.message}[/]")
            continue
        files = {p: v for p, v in f.get("files", {}).items() if v["record_sha256"]}
        match = sum(1 for v in files.values() if v["sha256"] == v["record_sha256"])
        lock = f["lock"]["holder"] if f.get("lock") else "-"
        table.add_row(
            r.host,
            f["python"],
            str(f["package_version"]),
            str(f["site_packages"]),
            f"{f['state_dir_free_bytes'] / 2**30:.1f} GiB",
            str(len(f["gpus"])),
            lock,
            f"{match}/{len(files)} base files match RECORD" if files else "-",
        )
    return table


def smoke_table(results: list[HostResult]) -> Table:
    """One row per host x suite: verdict, checks passed, time, and what failed where."""
    table = Table(title="smoke")
    for col in ("host", "suite", "result", "checks", "time", "details"):
        table.add_column(col, overflow="fold")
    for r in results:
        suites = r.details.get("suites") or []
        if not suites:
            style = _OUTCOME_STYLE[r.outcome]
            table.add_row(r.host, "-", f"[{style}]{r.outcome.value}[/]", "-", "-", r.message)
        for s in suites:
            checks = s.get("checks") or []
            failed = [c for c in checks if not c.get("passed")]
            verdict = (
                "[yellow]skipped[/]"
                if s.get("skipped")
                else "[green]passed[/]"
                if s.get("passed")
                else "[red]FAILED[/]"
            )
            details = "\n".join(f"{c['name']}: {c.get('detail', '')[:300]}" for c in failed)
            table.add_row(
                r.host,
                s.get("suite", "?"),
                verdict,
                f"{len(checks) - len(failed)}/{len(checks)}" if checks else "-",
                f"{s.get('duration_s', 0):.2f}s",
                escape(details or str(s.get("details", ""))[:400]),
            )
    return table


def plan_table(results: list[HostResult]) -> Table:
    table = Table(title="plan")
    for col in ("host", "file", "action"):
        table.add_column(col, overflow="fold")
    for r in results:
        files = r.details.get("files") or {}
        if not files:
            table.add_row(r.host, "-", f"[red]{r.message}[/]")
        serve = r.details.get("serve") or {}
        for path, state in files.items():
            style = {"drifted": "red", "unchanged": "dim"}.get(state, "yellow")
            action = f"[{style}]{state}[/]"
            if state == "flags":  # the serve file: which server flags change
                changes = "; ".join(serve.get("changes") or []) or "rewrite (same flags)"
                action = f"[yellow]flags[/] {escape(changes)}"
            table.add_row(r.host, path, action)
    return table


def status_table(results: list[HostResult]) -> Table:
    table = Table(title="status")
    columns = ("host", "sglang", "deployed", "lock", "backups", "last journal", "serve", "note")
    for col in columns:
        table.add_column(col, overflow="fold")
    for r in results:
        d = r.details
        if "journal" not in d:
            table.add_row(r.host, "-", "-", "-", "-", "-", "-", f"[red]{r.message}[/]")
            continue
        last = d["journal"][-1] if d["journal"] else {}
        table.add_row(
            r.host,
            str(d["package_version"]),
            str(d["deployed"] or "-"),
            d["lock"]["holder"] if d["lock"] else "-",
            str(len(d["backups"])),
            f"{last.get('state', '-')} {last.get('deploy_id', '')}",
            escape(d.get("serving") or "-"),
            r.message,
        )
    return table


def backups_table(results: list[HostResult]) -> Table:
    table = Table(title="backups")
    for col in ("host", "deploy id", "patchset", "created"):
        table.add_column(col, overflow="fold")
    for r in results:
        for b in r.details.get("backups") or []:
            table.add_row(r.host, b["deploy_id"], str(b["patchset"]), str(b["created"]))
    return table
