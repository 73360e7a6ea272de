"""Scenario V's section of docs/benchmarks.md: time to a verified server, per stage (pure:
results dict in, markdown lines out; bench/report.py calls it)."""

from __future__ import annotations

METHOD_V = """\
**How V is measured.** `python bench/run_benchmarks.py --only V [--v-hosts 1] [--v-runs 3]`
starts its own sandbox of real sglang 0.5.13.post1 hosts (tiny CPU models serving DFLASH,
as in tests/serving) and times N fresh `push --all --gate full --json` processes of ddtree
1.1.0, each rolled back (untimed) before the next. Each stage's time is the `duration_s` of
its `ok` line (docs/ci.md); *unaccounted* is the push's wall minus the stages (CLI start-up,
connect, round trips, wind-down). *Old server serving*: **yes** for every stage before the
restart (the old code still answers traffic), **no (down)** for drain/restart/health,
**no (new server)** from verify on. Rows pool every host of every run; spread is min–max;
share is the median over the median total. CPU servers on a shared 2-core machine: read the
shares and the old-serves/down/new split, not the absolute seconds. The reference (the
`server` suite recording the old server) runs beside the pre-restart suites: its row overlaps
smoke's and is not subtracted from the wall. `--v-serial` also pushes by the serial path
before that cut (bench only, `DDTREE_DEPLOY_BENCH_REFERENCE_APART=1`: the reference a request
of its own after the suites), back to back with each run in alternating order: the cut table
gives medians of both sides and of the per-pair savings, with the savings' spread."""


def _fmt_s(value: float) -> str:
    return f"{value:.2f}"


def render_verified_rows(rows: list[dict]) -> list[str]:
    """The breakdown table: stage, median s, spread, old server serving, share of total."""
    lines = [
        "| stage | median s | spread (min–max) s | old server serving | share of total |",
        "|---|---:|---|---|---:|",
    ]
    for row in rows:
        lines.append(
            f"| {row['stage']} | {_fmt_s(row['median_s'])} | "
            f"{_fmt_s(row['min_s'])}–{_fmt_s(row['max_s'])} | {row['serving']} | "
            f"{row['share'] * 100:.0f}% |"
        )
    return lines


def render_suite_rows(rows: list[dict]) -> list[str]:
    """The per-suite table: the smoke/reference/verify stages' suites, one process each."""
    lines = [
        "| stage: suite | median s | spread (min–max) s | old server serving |",
        "|---|---:|---|---|",
    ]
    for row in rows:
        lines.append(
            f"| {row['stage']} | {_fmt_s(row['median_s'])} | "
            f"{_fmt_s(row['min_s'])}–{_fmt_s(row['max_s'])} | {row['serving']} |"
        )
    return lines


def render_cut_rows(rows: list[dict]) -> list[str]:
    """The paired before/after table: stage, both medians, the median saving and its spread."""
    lines = [
        "| stage | reference apart (before) median s | beside smoke (after) median s "
        "| saved, median of pairs s | saved spread (min–max) s |",
        "|---|---:|---:|---:|---|",
    ]
    for row in rows:
        lines.append(
            f"| {row['stage']} | {_fmt_s(row['before_s'])} | {_fmt_s(row['after_s'])} | "
            f"{_fmt_s(row['saved_s'])} | {_fmt_s(row['saved_min_s'])}–"
            f"{_fmt_s(row['saved_max_s'])} |"
        )
    return lines


def render_verified(v: dict | None) -> list[str]:
    """The whole V section; a line saying it was not run when results have no V."""
    lines = ["## V: time to a verified server (every gate, real sglang servers)", ""]
    if not v or not v.get("rows"):
        why = (v or {}).get("why", "not run in this bench run (`--only V` runs it)")
        return [*lines, f"Not measured: {why}.", "", METHOD_V, ""]
    setup = v.get("setup", {})
    phases = v.get("phases", {})
    lines += [
        f"{setup.get('hosts')} host(s), {setup.get('runs')} run(s) of `push --gate "
        f"{setup.get('gate')}` ({setup.get('patchset')}, sglang {setup.get('sglang')}); "
        f"sandbox start {setup.get('sandbox_start_s')} s.",
        "",
        *render_verified_rows(v["rows"]),
        "",
        f"Medians by what serves meanwhile: old server {phases.get('yes', 0):.2f} s, "
        f"down {phases.get('no (down)', 0):.2f} s, new server (verifying) "
        f"{phases.get('no (new server)', 0):.2f} s.",
        "",
    ]
    if v.get("suites"):
        lines += [
            "Inside those stages, each suite is one process on the host (a suite's own time;"
            " smoke's one after another, the reference's beside them):",
            "",
            *render_suite_rows(v["suites"]),
            "",
        ]
    if v.get("cut"):
        runs = v["cut"][0]["runs"]
        lines += [
            f"The reference cut, {runs} interleaved pair(s) of pushes (the serial path before "
            "it, then the push as it is, alternating which goes first):",
            "",
            *render_cut_rows(v["cut"]),
            "",
        ]
    lines += [
        METHOD_V,
        "",
    ]
    return lines
