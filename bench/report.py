"""Render bench/results.json as docs/benchmarks.md (+ docs/benchmarks.png, one panel per
scenario, when matplotlib is installed). Numbers are what one `make bench` measured; the
targets table's verdicts come from bench/summary.py."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from report_method import METHOD
from report_peers import peer_rows, render_controller, render_floor
from report_verified import render_verified
from summary import DDTREE_A, target_rows

STAGE_GROUPS_A = 5  # preflight, backup+journal, install+compile, restart+health, commit


def _row(name: str, summary: dict, extra: str = "") -> str:
    return (
        f"| {name} | {summary['median_s']:.2f} | {summary['min_s']:.2f} | "
        f"{summary['max_s']:.2f} | {summary['runs']} |{extra}"
    )


def _loads(values: list[float]) -> str:
    return f"{min(values):.1f}–{max(values):.1f}" if values else "?"


def render_a(results: dict) -> list[str]:
    lines: list[str] = []
    for rtt, tools in results.get("A", {}).items():
        ratios = results["A_ratios"][rtt]
        base = tools[DDTREE_A]["median_s"]
        lines += [
            f"## Scenario A: deploy ddtree 1.0.0 to 4 hosts at {rtt} ms RTT",
            "",
            f"Paired (per-run) ratio Ansible / ddtree-deploy: cold {ratios['cold']['median']}× "
            f"({ratios['cold']['min']}–{ratios['cold']['max']}), warm "
            f"{ratios['warm']['median']}× ({ratios['warm']['min']}–{ratios['warm']['max']}).",
            "",
            "| tool | median s | min s | max s | runs | × ddtree-deploy | CPU s | load 1m |",
            "|---|---|---|---|---|---|---|---|",
        ]
        for name, summary in tools.items():
            extra = (
                f" {summary['median_s'] / base:.1f}× | {summary['cpu_s']['median_s']:.2f} | "
                f"{_loads(summary['load_1m'])} |"
            )
            lines.append(_row(name, summary, extra))
        lines.append("")
    trips = results.get("round_trips")
    if trips:
        lines += [
            "## Round trips per host per push (TransportStats, 25 ms)",
            "",
            "| push | connects | execs after connect | floor | bytes sent |",
            "|---|---|---|---|---|",
        ]
        for name, counts in trips.items():
            floor = STAGE_GROUPS_A + (1 if "integrity" in name else 0)
            lines.append(
                f"| {name} | {counts['connects']} | {counts['execs']} | 1 connect + {floor} "
                f"execs (one per stage group) | {counts['bytes_sent_median']} |"
            )
        lines.append("")
    return lines


def render_aplus(aplus: dict) -> list[str]:
    beside = aplus["push"]["median_s"] - aplus["smoke_on_host"]["median_s"]
    return [
        f"## Scenario A+: the full gate (A plus the `imports` smoke), {aplus.get('hosts', 4)} "
        "host(s)",
        "",
        "| measure | median s | min s | max s | runs |",
        "|---|---|---|---|---|",
        _row('ddtree-deploy push, suites ["imports"]', aplus["push"]),
        _row("compute floor: the same suite alone over plain ssh", aplus["floor"]),
        _row("overhead = push − floor (paired per run)", aplus["overhead"]),
        _row("smoke stage on one host (agent-side)", aplus["smoke_on_host"]),
        "",
        f"Push minus the smoke stage's own time on the host: {beside:.2f} s.",
        "",
    ]


def render_b(b: dict, rtt_ms: object) -> list[str]:
    lines = [
        f"## Scenario B: scaling (ddtree-deploy, scenario A work, {rtt_ms} ms, --parallel N)",
        "",
        "Controller CPU: the `ddtree-deploy` process (RUSAGE_CHILDREN). Proxies: the delay",
        "proxies' threads (the bench process). Rest: the machine's busy CPU minus both: the",
        "sandbox hosts' sshd, agents and service commands, plus any other work on the",
        "machine. `bench/host_cpu.py` splits the rest by process (BSD process accounting):",
        "at 16 hosts on a quiet machine, per host, the agent 0.116 s, processes still running",
        "at the end (the new servers) 0.056 s, the service's stop/start/status 0.035 s, sshd",
        "0.002 s (bench/NOTES.md, session 17).",
        "",
        "| hosts | median s | min s | max s | runs | × 1 host (paired) | controller CPU s/host"
        " | proxies CPU s/host | rest CPU s/host | load 1m |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for n, summary in b.items():
        ratio = summary["ratio"]
        extra = (
            f" {ratio['median']}× ({ratio['min']}–{ratio['max']}) | "
            f"{summary['cpu_per_host']['median_s']:.3f} | "
            f"{summary['proxies_cpu_per_host']['median_s']:.3f} | "
            f"{summary['hosts_cpu_per_host']['median_s']:.3f} | "
            f"{_loads(summary['load_1m']['all'])} |"
        )
        lines.append(_row(n, summary, extra))
    return [*lines, ""]


def render_i(gate: dict) -> list[str]:
    ratio = gate["ratio"]
    return [
        "## Scenario I: the import gate vs its floor (one host, interleaved)",
        "",
        "Floor: ONE fresh process of the host's python importing every patched module once",
        f"({', '.join(gate['modules'])}); gate: the `imports` suite script with the input a",
        "push gives it. Both over plain ssh to the same sandbox host, patched files in place.",
        "",
        "| measure | median s | min s | max s | runs |",
        "|---|---|---|---|---|",
        _row("floor: one process imports every patched module", gate["floor"]),
        _row("`imports` suite", gate["suite"]),
        "",
        f"Paired ratio suite / floor: {ratio['median']}× ({ratio['min']}–{ratio['max']}); "
        f"load {_loads(gate['load_1m'])}.",
        "",
    ]


def render_c(c: dict) -> list[str]:
    gap_ms = c["rollback_after_decision"]["median_s"] * 1000
    return [
        "## Scenario C: rollback after a failed health gate (4 hosts, ready_timeout_s 1)",
        "",
        "| measure | median s | min s | max s | samples |",
        "|---|---|---|---|---|",
        _row("whole push (exit 1, rolled back)", c["push_total"]),
        _row("health `fail` → rollback `ok` event, per host", c["rollback_after_decision"]),
        _row(
            "of which on the host (restore, journal, restart, health, unlock)",
            c["rollback_on_host"],
        ),  # fmt: skip
        "",
        f"{gap_ms:.0f} ms after the decision; network and process time beyond the host's own "
        f"work: median {c['network_rtts']['median']} RTT, max {c['network_rtts']['max']} RTT.",
        "",
    ]


def render_d(d: dict) -> list[str]:
    return [
        "## Scenario D: idempotent re-push (no changes), 4 hosts",
        "",
        "| measure | median s | min s | max s | runs |",
        "|---|---|---|---|---|",
        _row("re-push (every host answers no changes)", d["repush"]),
        "",
        f"Per host: connects {d['round_trips']['connects']}, execs "
        f"{d['round_trips']['execs']} (preflight answers `no_changes`).",
        "",
    ]


def render_profile(profile: dict) -> list[str]:
    lines = [
        "## Where a scenario-A push spends its time (ddtree-deploy, 4 hosts)",
        "",
        "From the `--json` event timestamps. A request's controller wall includes the SSH",
        "channel open, the exec, Python start-up and the agent's imports on the host.",
        "",
        "| part | median s | min s | max s | samples |",
        "|---|---|---|---|---|",
    ]
    for name, summary in {**profile["phases"], **profile["requests"]}.items():
        lines.append(_row(name, summary))
    return [
        *lines,
        "",
        f"`python -m ddtree_deploy --help` alone (start-up, no hosts): "
        f"{profile['cli_help_s']:.2f} s.",
        "",
    ]


def _span(times: dict) -> str:
    """`median (min–max)` of one timing dict, in ms."""
    return f"{times['median']:.1f} ({times['min']:.1f}–{times['max']:.1f})"


def render_builder(results: dict) -> list[str]:
    lines: list[str] = []
    rows = (results.get("builder_vs_reference") or {}).get("rows")
    if rows:
        lines += [
            "## DDTree builder vs the reference's algorithm (CPU, interleaved)",
            "",
            "| budget | threads | ours ms (min–max) | reference ms (min–max) "
            "| ours / reference (per-round min–max) | 1.0.0's builder / reference | ≤ 0.8× |",
            "|---|---|---|---|---|---|---|",
        ]
        lines += [
            f"| {r['budget']} | {r['threads']} | {_span(r['ours_ms'])} | {_span(r['ref_ms'])} "
            f"| {r['ratio']:.2f}× ({r['ratio_min']:.2f}–{r['ratio_max']:.2f}) "
            f"| {r['old_ratio']:.2f}× | {'met' if r['met'] else 'missed'} |"
            for r in rows
        ]
        lines.append("")
    builder = results.get("builder")
    if builder:
        lines += [
            "## DDTree builder (`bench/bench_ddtree_builder.py`)",
            "",
            "```",
            builder["output"].rstrip(),
            "```",
            "",
        ]
    return lines


def render_targets(results: dict) -> list[str]:
    lines = [
        "## Targets (issues 19 and 46)",
        "",
        "| target | measured | verdict | why |",
        "|---|---|---|---|",
    ]
    for row in [*target_rows(results), *peer_rows(results)]:
        lines.append(f"| {row.target} | {row.measured} | **{row.verdict}** | {row.why} |")
    return [*lines, ""]


def machine_speed_line(setup: dict) -> list[str]:
    """The box's speed at the start of the run (run_benchmarks.machine_speed), when recorded."""
    if "python_loop_ms" not in setup:
        return []
    return [
        f"Machine speed at the start: a fixed Python loop (10^6 multiply-adds) "
        f"{setup['python_loop_ms']} ms, `python -c pass` {setup['python_start_ms']} ms (medians "
        "of 5). The same box has run twice as slow on some days: compare runs by these first.",
        "",
    ]


def render(results: dict, png_name: str | None) -> str:
    setup = results.get("setup", {})
    walls = ", ".join(f"{v} s" for k, v in setup.items() if k.startswith("bench_wall_s"))
    lines = [
        "# Benchmarks",
        "",
        "Generated by `make bench` (`bench/run_benchmarks.py`, then `bench/report.py`); the raw",
        "numbers are in `bench/results.json`. All times are wall seconds of one run of the",
        "whole command, measured on one shared machine in one session, every comparison",
        "interleaved run by run: compare the **ratios**; absolute times move with the machine",
        "and are never asserted by tests.",
        "",
        f"Setup: RTT {setup.get('rtt_ms')} ms set on the proxies (measured through one: "
        f"{setup.get('measured_rtt_ms')} ms ping-pong, {setup.get('measured_first_reply_ms')} ms "
        f"connect + first reply), {setup.get('cpus')} CPU cores shared with other "
        f"work, python {setup.get('python')}, {setup.get('ansible')}, "
        f"{setup.get('hosts_started')} sandbox hosts (started in "
        f"{setup.get('sandbox_start_s', '?')} s; memory in use with them up: "
        f"{setup.get('memory_used_mib_at_start', '?')} MiB), {setup.get('date')}, bench wall "
        f"{walls}; 1-minute load average {setup.get('load_average_at_start', '?')} at the "
        f"start and {setup.get('load_average_at_end', '?')} at the end, and per run in the "
        "tables (the two cores serve whatever else runs on the machine too).",
        "",
        *machine_speed_line(setup),
    ]
    lines += render_targets(results)
    if png_name:
        lines += [f"![one panel per scenario]({png_name})", ""]
    lines += render_a(results)
    lines += render_floor(results)
    if results.get("A+"):
        lines += render_aplus(results["A+"])
    if results.get("B"):
        lines += render_b(results["B"], setup.get("rtt_ms"))
    lines += render_controller(results.get("B_ctl"))
    if results.get("I"):
        lines += render_i(results["I"])
    if results.get("C"):
        lines += render_c(results["C"])
    if results.get("D"):
        lines += render_d(results["D"])
    if results.get("profile"):
        lines += render_profile(results["profile"])
    lines += render_builder(results)
    lines += render_verified(results.get("V"))
    notes = Path(__file__).with_name("NOTES.md")
    if notes.exists():
        lines += [notes.read_text().rstrip(), ""]
    lines.append(METHOD)
    return "\n".join(lines)


def _bars(ax, names: list[str], summaries: list[dict], title: str) -> None:
    """Horizontal bars: medians with min–max whiskers."""
    med = [s["median_s"] for s in summaries]
    err = [[m - s["min_s"] for m, s in zip(med, summaries, strict=True)],
           [s["max_s"] - m for m, s in zip(med, summaries, strict=True)]]  # fmt: skip
    ax.barh(range(len(names)), med, xerr=err, color="tab:blue", capsize=3)
    ax.set_yticks(range(len(names)), names, fontsize=7)
    ax.invert_yaxis()
    ax.set_xlabel("wall s (median, min–max)")
    ax.set_title(title, fontsize=9)


def plot(results: dict, png: Path) -> bool:
    """One panel per scenario that ran (A per RTT, B, I, builder); False without matplotlib."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    panels = []
    for rtt, tools in results.get("A", {}).items():
        panels.append(("A", rtt, tools))
    if results.get("B"):
        panels.append(("B", None, results["B"]))
    if results.get("I"):
        panels.append(("I", None, results["I"]))
    if (results.get("builder_vs_reference") or {}).get("rows"):
        panels.append(("builder", None, results["builder_vs_reference"]["rows"]))
    if not panels:
        return False
    cols = 2
    rows = (len(panels) + cols - 1) // cols
    fig, axes = plt.subplots(rows, cols, figsize=(12, 3.6 * rows), squeeze=False)
    for ax, (kind, rtt, data) in zip(axes.flat, panels, strict=False):
        if kind == "A":
            names = [n.replace(" (", "\n(") for n in data]
            _bars(ax, names, list(data.values()), f"A: 4 hosts, {rtt} ms RTT")
        elif kind == "B":
            sizes = [int(n) for n in data]
            med = [data[str(n)]["median_s"] for n in sizes]
            ax.errorbar(
                sizes, med, marker="o", capsize=3, label="wall s",
                yerr=[[m - data[str(n)]["min_s"] for n, m in zip(sizes, med, strict=True)],
                      [data[str(n)]["max_s"] - m for n, m in zip(sizes, med, strict=True)]],
            )  # fmt: skip
            ax.plot(sizes, [data[str(n)]["cpu_s"]["median_s"] for n in sizes], marker="s",
                    label="controller CPU s")  # fmt: skip
            ax.set_xscale("log", base=2)
            ax.set_xticks(sizes, [str(n) for n in sizes])
            ax.set_ylim(bottom=0)
            ax.set_xlabel("hosts")
            ax.legend(fontsize=7)
            ax.set_title("B: scaling (median, min–max)", fontsize=9)
        elif kind == "I":
            _bars(ax, ["floor: one process", "imports suite"], [data["floor"], data["suite"]],
                  "I: import gate vs its floor")  # fmt: skip
        else:
            labels = [f"{r['budget']}/{r['threads']}t" for r in data]
            ax.bar(labels, [r["ratio"] for r in data], color="tab:green")
            ax.axhline(0.8, color="tab:red", linestyle="--", label="target 0.8×")
            ax.set_ylabel("ours / reference")
            ax.legend(fontsize=7)
            ax.set_title("builder vs reference (budget/threads)", fontsize=9)
    for ax in list(axes.flat)[len(panels) :]:
        ax.set_visible(False)
    fig.tight_layout()
    fig.savefig(png, dpi=100)
    return True


def write_report(results: dict, doc: Path) -> None:
    png = doc.with_suffix(".png")
    made = plot(results, png)
    doc.write_text(render(results, png.name if made else None))


if __name__ == "__main__":
    repo = Path(__file__).resolve().parents[1]
    source = Path(sys.argv[1]) if len(sys.argv) > 1 else repo / "bench" / "results.json"
    write_report(json.loads(source.read_text()), repo / "docs" / "benchmarks.md")
