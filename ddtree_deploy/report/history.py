"""The `history` table: every host's deploys, across the fleet, in the order they started.

Everything in it came from the hosts' journals: each cell is cleaned of escapes and
control characters and its markup escaped (report/clean.py `plain`).
"""

from __future__ import annotations

from typing import Any

from rich.table import Table

from ddtree_deploy.agent.host.wire import JournalState
from ddtree_deploy.report.clean import plain
from ddtree_deploy.results import HostResult, Outcome

# The Rich style of a deploy's last journal state (the record's "outcome", a plain str: a
# JournalState equals and hashes as its value); unfinished ones are the ones to act on.
_STATE_STYLE: dict[str, str] = {
    JournalState.COMMITTED: "green",
    JournalState.ROLLED_BACK: "yellow",
    JournalState.INSTALLING: "bold red",
    JournalState.ROLLBACK_FAILED: "bold red",
}


def history_rows(results: list[HostResult]) -> list[tuple[str, dict[str, Any]]]:
    """(host, deploy record) for every deploy the results carry, oldest start first (the
    hosts' UTC stamps sort as text; a host's own order is kept among equal stamps)."""
    rows = [(r.host, dict(d)) for r in results for d in r.details.get("history") or []]
    return sorted(rows, key=lambda row: str(row[1].get("started") or ""))


def who(record: dict[str, Any]) -> str:
    """Who ran a deploy: its holder without the process id, and who ended it when that
    was someone else; `?` when the journal does not say (entries older than history)."""
    holder = _person(record.get("holder"))
    ended_by = _person(record.get("ended_by"))
    shown = holder or "?"
    return f"{shown} (ended by {ended_by})" if ended_by else shown


def _person(holder: object) -> str:
    """`user@machine` of a lock holder `user@machine pid N`."""
    return str(holder or "").split(" pid ", 1)[0]


def history_table(results: list[HostResult]) -> Table:
    """One row per deploy: started, host, patchset, outcome, who, deploy id, reason; the
    caption names the hosts whose journal could not be read, and why."""
    unread = [r for r in results if r.outcome != Outcome.OK]
    caption = "; ".join(f"{r.host}: {r.outcome.value}: {r.shown_message}" for r in unread)
    table = Table(title="history", caption=plain(f"not read: {caption}") if caption else None)
    for col in ("started", "host", "patchset", "outcome", "by", "deploy id", "reason"):
        table.add_column(col, overflow="fold")
    for host, record in history_rows(results):
        state = str(record.get("outcome") or "?")
        style = _STATE_STYLE.get(state, "")
        table.add_row(
            plain(record.get("started") or "?"),
            plain(host),
            plain(record.get("patchset") or "?"),
            f"[{style}]{plain(state)}[/]" if style else plain(state),
            plain(who(record)),
            plain(record.get("deploy_id") or "?"),
            plain(str(record.get("reason") or "")[:300]),
        )
    return table
