"""The end-of-run summary: a Rich table for people, a Markdown table for a CI job summary."""

from __future__ import annotations

from pathlib import Path

from rich.table import Table

from ddtree_deploy.report.clean import clean_text, plain
from ddtree_deploy.report.gate_verdict import gate_checks, gate_observed, verdict_words
from ddtree_deploy.results import HostResult, Outcome

# The Rich style of each outcome, wherever an outcome is shown to people.
OUTCOME_STYLE = {
    Outcome.OK: "green",
    Outcome.NO_CHANGES: "green",
    Outcome.NOT_STARTED: "dim",
    Outcome.ROLLED_BACK: "yellow",
    Outcome.REFUSED: "red",
    Outcome.NEEDS_ATTENTION: "bold red",
    Outcome.LOCKED: "magenta",
    Outcome.FAILED: "red",
}
# Outcomes that leave the host's files as they were before this run.
_UNCHANGED = {Outcome.NOT_STARTED, Outcome.ROLLED_BACK, Outcome.REFUSED, Outcome.LOCKED}


def version_label(result: HostResult) -> str:
    """What the host runs now: the version, `as before` when this run changed nothing, or `?`."""
    if result.version_now:
        return result.version_now
    if result.outcome in _UNCHANGED:
        return "as before"
    return "?" if result.outcome == Outcome.NEEDS_ATTENTION else "-"


def host_label(result: HostResult) -> str:
    """The host's name, with its restart group when it ran as a member of one."""
    group = result.details.get("group")
    return f"{result.host} (group {group})" if group else result.host


def count_outcomes(results: list[HostResult]) -> dict[str, int]:
    """{outcome: hosts} in Outcome order, zero counts left out."""
    counts = {o.value: sum(r.outcome == o for r in results) for o in Outcome}
    return {k: v for k, v in counts.items() if v}


def _headline(results: list[HostResult], stopped: str | None) -> str:
    counts = ", ".join(f"{v} {k}" for k, v in count_outcomes(results).items()) or "no hosts"
    return f"{counts}" + (f"; stopped: {stopped}" if stopped else "")


def fleet_table(title: str, results: list[HostResult], stopped: str | None = None) -> Table:
    """One row per host: outcome, version now, wave, duration, message."""
    waves = _has_waves(results)
    table = Table(title=title, caption=plain(_headline(results, stopped)))
    for col in ("host", "outcome", "version now", "wave", "duration", "message"):
        if col != "wave" or waves:
            table.add_column(col, overflow="fold")
    for r in results:
        cells = [
            plain(host_label(r)),
            f"[{OUTCOME_STYLE[r.outcome]}]{r.outcome.value}[/]",
            plain(version_label(r)),
            plain(r.details.get("wave") or "-"),
            f"{r.details.get('duration_s', 0):.1f}s",
            plain(r.shown_message),
        ]
        table.add_row(*(cells if waves else cells[:3] + cells[4:]))
    return table


def _has_waves(results: list[HostResult]) -> bool:
    return any(r.details.get("wave") for r in results)


def _cell(text: str) -> str:
    """A Markdown table cell: the host's escapes dropped (report/clean.py), pipes escaped."""
    return clean_text(text).replace("\\", "\\\\").replace("|", "\\|").replace("\n", " ")[:300]


def summary_markdown(title: str, results: list[HostResult], stopped: str | None = None) -> str:
    """A GitHub/GitLab-flavoured Markdown section: heading, headline, per-host table."""
    lines = [
        f"### ddtree-deploy {_cell(title)}",
        "",
        f"**{_cell(_headline(results, stopped))}**",
        "",
        "| host | outcome | version now | wave | duration | message |",
        "| --- | --- | --- | --- | ---: | --- |",
    ]
    for r in results:
        cells = [
            host_label(r),
            r.outcome.value,
            version_label(r),
            str(r.details.get("wave") or "-"),
            f"{r.details.get('duration_s', 0):.1f}s",
            r.shown_message,
        ]
        lines.append("| " + " | ".join(_cell(c) for c in cells) + " |")
    checks = [(r.host, c, gate_observed(r)) for r in results for c in gate_checks(r)]
    if checks:
        lines += [
            "",
            "| host | check | baseline | new | limit | result |",
            "| --- | --- | ---: | ---: | --- | --- |",
        ]
        for host, c, observed in checks:
            words = verdict_words(c, observed)
            verdict = words if c.get("passed") else f"**{words}**"
            cells = [
                host,
                f"gate.{c.get('name')}",
                *(str(c.get(k) or "-") for k in ("baseline", "new", "limit")),
            ]
            lines.append("| " + " | ".join(_cell(x) for x in cells) + f" | {verdict} |")
    return "\n".join(lines) + "\n\n"


def append_summary(path: Path, markdown: str) -> None:
    """Append (as $GITHUB_STEP_SUMMARY expects), creating the file and its folder if needed."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a", encoding="utf-8") as out:
        out.write(markdown)
