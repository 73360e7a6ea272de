"""Rich tables for people: the facts of `hosts check`, smoke, plan, status and backups.

Every cell that carries host, inventory or remote text goes through `_plain` (markup escaped), so
a message quoting code such as `out[b]` prints verbatim.
"""

from __future__ import annotations

from typing import Any

from rich.table import Table

from ddtree_deploy.report.clean import plain
from ddtree_deploy.report.gate_verdict import (
    gate_checks,
    gate_observed,
    verdict_style,
    verdict_words,
)
from ddtree_deploy.report.summary import OUTCOME_STYLE
from ddtree_deploy.results import HostDetails, HostResult


def _plain(value: object) -> str:
    """`value` as text with Rich markup escaped and a host's escapes dropped: shown as is."""
    return plain(value)


def _become_cell(details: HostDetails) -> str:
    """`become`: ok (as the facts' user) in green, a refusal in red, "-" when unused."""
    become = details.get("become")
    if become is None:
        return "-"
    if become == "ok":
        return f"[green]ok[/] ({_plain(details.get('user') or '?')})"
    return f"[red]{_plain(become)}[/]"


def facts_table(results: list[HostResult]) -> Table:
    """One row per host: become, python, sglang, how it is installed (wheel | editable) and
    where its files are, free space, GPUs, lock, base files."""
    table = Table(title="hosts check")
    columns = (
        "host", "become", "python", "sglang", "install", "package root", "free", "gpus", "lock",
    )  # fmt: skip
    for col in (*columns, "files"):
        table.add_column(col, overflow="fold")
    for r in results:
        f = r.details
        if "python" not in f:
            row = ("-", "-", "-", "-", "-", "-", "-", f"[red]{_plain(r.message)}[/]")
            table.add_row(_plain(r.host), _become_cell(f), *row)
            continue
        files = {p: v for p, v in _file_facts(f).items() if v["record_sha256"]}
        match = sum(1 for v in files.values() if v["sha256"] == v["record_sha256"])
        held = f.get("lock")
        lock = held["holder"] if held else "-"
        route = f.get("route") or []
        via = "".join(f"\n via {_plain(hop)}" for hop in route[:-1])
        table.add_row(
            _plain(r.host + _container_note(f.get("container"))) + via,
            _become_cell(f),
            _plain(f["python"]),
            _plain(f["package_version"]),
            _plain(f.get("install_kind") or "-"),
            _plain(f.get("package_root") or f.get("locate_error") or "-"),
            f"{f['state_dir_free_bytes'] / 2**30:.1f} GiB",
            str(len(f["gpus"])),
            _plain(lock),
            f"{match}/{len(files)} base files match RECORD" if files else _no_record(f),
        )
    return table


def _file_facts(details: HostDetails) -> dict[str, dict[str, Any]]:
    """Each file's facts as `hosts check` records them (details["files"]: FileFacts as
    JSON, by path); {} without them."""
    files = details.get("files")
    if not isinstance(files, dict):
        return {}
    return {path: facts for path, facts in files.items() if isinstance(facts, dict)}


def _file_states(details: HostDetails) -> dict[str, str]:
    """Each file's state as `plan` records it (details["files"]: new, patched, unchanged,
    drifted, flags, by path); {} without them."""
    files = details.get("files")
    if not isinstance(files, dict):
        return {}
    return {path: state for path, state in files.items() if isinstance(state, str)}


def _serve_changes(details: HostDetails) -> list[str]:
    """The server flags a push would change, as `plan` records them (details["serve"])."""
    serve = details.get("serve")
    return list(serve.get("changes") or []) if isinstance(serve, dict) else []


def _no_record(facts: HostDetails) -> str:
    """The files cell without RECORD hashes: an editable install has none (the lock judges
    its base files)."""
    return "no RECORD (editable)" if facts.get("install_kind") == "editable" else "-"


def _container_note(container: dict[str, Any] | None) -> str:
    """` [NAME ID12 IMAGE]` for a container host's facts, "" for any other host."""
    if not container:
        return ""
    return f" [{container['name']} {container['id'][:12]} {container['image']}]"


def _suite_verdict(suite: dict[str, Any]) -> str:
    if suite.get("skipped"):
        return "[yellow]skipped[/]"
    return "[green]passed[/]" if suite.get("passed") else "[red]FAILED[/]"


def smoke_table(results: list[HostResult]) -> Table:
    """One row per host x suite: verdict, checks passed, time, and what failed where."""
    table = Table(title="smoke")
    for col in ("host", "suite", "result", "checks", "time", "details"):
        table.add_column(col, overflow="fold")
    for r in results:
        suites = r.details.get("suites") or []
        if not suites:
            style = OUTCOME_STYLE[r.outcome]
            outcome = f"[{style}]{r.outcome.value}[/]"
            table.add_row(_plain(r.host), "-", outcome, "-", "-", _plain(r.message))
        for s in suites:
            checks = s.get("checks") or []
            failed = [c for c in checks if not c.get("passed")]
            details = "\n".join(f"{c['name']}: {c.get('detail', '')[:300]}" for c in failed)
            table.add_row(
                _plain(r.host),
                _plain(s.get("suite", "?")),
                _suite_verdict(s),
                f"{len(checks) - len(failed)}/{len(checks)}" if checks else "-",
                f"{s.get('duration_s', 0):.2f}s",
                _plain(details or str(s.get("details", ""))[:400]),
            )
    return table


def plan_table(results: list[HostResult]) -> Table:
    """One row per host x file: new, patched, unchanged, drifted, or the serve file's flags;
    for an editable install, first a row naming the source tree the paths are relative to."""
    table = Table(title="plan")
    for col in ("host", "file", "action"):
        table.add_column(col, overflow="fold")
    for r in results:
        files = _file_states(r.details)
        if not files:
            table.add_row(_plain(r.host), "-", f"[red]{_plain(r.message)}[/]")
        if r.details.get("install_kind") == "editable":  # the files live in a source tree
            root = r.details.get("package_root")
            table.add_row(_plain(r.host), "[dim](package root)[/]", f"editable: {_plain(root)}")
        for path, state in files.items():
            style = {"drifted": "red", "unchanged": "dim"}.get(state, "yellow")
            action = f"[{style}]{_plain(state)}[/]"
            if state == "flags":  # the serve file: which server flags change
                changes = "; ".join(_serve_changes(r.details)) or "rewrite (same flags)"
                action = f"[yellow]flags[/] {_plain(changes)}"
            table.add_row(_plain(r.host), _plain(path), action)
    return table


def status_table(results: list[HostResult]) -> Table:
    """One row per host: sglang, deployed patchset, lock, backups, last journal entry, serve."""
    table = Table(title="status")
    columns = (
        "host",
        "sglang",
        "deployed",
        "lock",
        "backups",
        "last journal",
        "serve",
        "services",
        "note",
    )
    for col in columns:
        table.add_column(col, overflow="fold")
    for r in results:
        d = r.details
        if "journal" not in d:
            row = ("-", "-", "-", "-", "-", "-", "-", f"[red]{_plain(r.message)}[/]")
            table.add_row(_plain(r.host), *row)
            continue
        last = d["journal"][-1] if d["journal"] else {}
        table.add_row(
            _plain(r.host),
            _plain(d["package_version"]),
            _plain(d["deployed"] or "-"),
            _plain(d["lock"]["holder"] if d["lock"] else "-"),
            str(len(d["backups"])),
            _plain(f"{last.get('state', '-')} {last.get('deploy_id', '')}"),
            _plain(d.get("serving") or "-"),
            _plain(describe_services(d.get("services") or []) or "-"),
            _plain(r.message),
        )
    return table


def describe_services(services: list[dict[str, Any]]) -> str:
    """`gpu0 running, HTTP 200; gpu1 stopped, no answer: ...` for the status table."""
    shown = []
    for state in services:
        running = {True: "running", False: "stopped", None: "state unknown"}[state["running"]]
        shown.append(f"{state['name']} {running}, {state['health']}")
    return "; ".join(shown)


def backups_table(results: list[HostResult]) -> Table:
    """One row per host x backup: deploy id, patchset, created; a dir without a readable
    manifest is shown as incomplete (no backup: rollback and recover cannot use it)."""
    table = Table(title="backups")
    for col in ("host", "deploy id", "patchset", "created"):
        table.add_column(col, overflow="fold")
    for r in results:
        for b in r.details.get("backups") or []:
            broken = b.get("broken")
            patchset = "INCOMPLETE (no manifest): not a backup" if broken else b["patchset"]
            cells = (r.host, b["deploy_id"], patchset, b["created"])
            table.add_row(*(_plain(c) for c in cells))
    return table


def gate_table(results: list[HostResult]) -> Table | None:
    """One row per host x serving-gate check: baseline, new, limit, verdict and why; None
    when no host ran the gate."""
    if not any(gate_checks(r) for r in results):
        return None
    table = Table(title="serving gate")
    for col in ("host", "check", "baseline", "new", "limit", "result", "details"):
        table.add_column(col, overflow="fold")
    for r in results:
        for c in gate_checks(r):
            first = str(c.get("detail") or "").splitlines()
            table.add_row(
                _plain(r.host),
                _plain(f"gate.{c.get('name')}"),
                _plain(str(c.get("baseline") or "-")),
                _plain(str(c.get("new") or "-")),
                _plain(str(c.get("limit") or "-")),
                f"[{verdict_style(c)}]{_plain(verdict_words(c, gate_observed(r)))}[/]",
                _plain(first[0][:300] if first else ""),
            )
    return table
