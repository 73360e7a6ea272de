"""Issue 46's tables and targets from bench/results.json (pure: tests/bench tests these).

- Scenario A against the floor (bench/floor.py), bare `ssh true` and pyinfra, per RTT, each
  ratio paired per run with its spread;
- scenario B-ctl: the controller alone, against the recorded-answer stand-in (timing only)
  and on real hosts pinned away from the controller, with Ansible's and pyinfra's CPU;
- the issue's targets as summary.TargetRow rows (met, missed, not run, and why).
"""

from __future__ import annotations

from floor import BARE_SSH, FLOOR
from pyinfra_peer import PYINFRA
from summary import ANSIBLE_COLD, DDTREE_A, TargetRow

FLOOR_FACTOR = 1.5  # ours ≤ 1.5× the floor at 25 ms
PYINFRA_FACTOR = 3.0  # pyinfra ≥ 3× ours at 25 ms
ANSIBLE_CPU_FRACTION = 20.0  # our controller CPU per host ≤ 1/20 of Ansible's
FLEET_FACTOR = 4.0  # wall at FLEET_HOSTS ≤ 4× one host, --parallel 64
FLEET_HOSTS = "256"
TARGET_RTT = "25"
NOT_IN_STANDIN = (
    "not measurable on the stand-in: it replays ddtree-deploy's agent answers only (Ansible "
    "and pyinfra send other programs, with per-run temp paths); see the pinned table"
)


def _ratio(r: dict | None) -> str:
    return f"{r['median']}× ({r['min']}–{r['max']})" if r else "—"


def _secs(s: dict | None, digits: int = 2) -> str:
    if not s:
        return "—"
    return f"{s['median_s']:.{digits}f} ({s['min_s']:.{digits}f}–{s['max_s']:.{digits}f})"


def render_floor(results: dict) -> list[str]:
    """Scenario A at each RTT: ours, the floor, bare ssh, pyinfra (median s, min–max) and the
    paired ratios; empty when the floor was not run."""
    ratios = results.get("A_floor") or {}
    if not ratios:
        return []
    lines = [
        "## Scenario A against the floor and pyinfra (4 hosts)",
        "",
        "Floor: `bench/floor.py`, one OpenSSH `ssh` per host, all hosts at once, one exec each",
        "running a shell script that does the push's work (lock, back up, write, sha256 check,",
        "py_compile, service stop/start/status, health, journal line). `ssh true`: connect,",
        "auth and one empty exec per host. pyinfra: `bench/pyinfra-deploy/deploy.py`, cold. Wall",
        "seconds median (min–max); ratios paired per interleaved run, median (min–max).",
        "",
        "| RTT ms | ours s | floor s | ssh true s | pyinfra s | ours / floor | "
        "ours / ssh true | pyinfra / ours |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for rtt, pair in sorted(ratios.items(), key=lambda kv: float(kv[0])):
        tools = (results.get("A") or {}).get(rtt) or {}
        pyinfra = (
            _ratio(pair.get("pyinfra_over_ours"))
            if "pyinfra_over_ours" in pair
            else pair.get("pyinfra_why", "—")
        )
        lines.append(
            f"| {rtt} | {_secs(tools.get(DDTREE_A))} | {_secs(tools.get(FLOOR))} | "
            f"{_secs(tools.get(BARE_SSH))} | {_secs(tools.get(PYINFRA))} | "
            f"{_ratio(pair.get('ours_over_floor'))} | {_ratio(pair.get('ours_over_bare_ssh'))} | "
            f"{pyinfra} |"
        )
    return [*lines, ""]


def render_controller(b_ctl: dict | None) -> list[str]:
    """Scenario B-ctl's two tables, or the line saying why the machine could not show them."""
    if not b_ctl:
        return []
    lines = ["## Scenario B-ctl: the controller alone", ""]
    if b_ctl.get("why"):
        return [*lines, f"Not measured: {b_ctl['why']}.", ""]
    lines += [
        f"Controller on core(s) {b_ctl['controller_cores']}, everything host-side on "
        f"{b_ctl['host_cores']} (`taskset`). CPU: the tool's process tree (RUSAGE_CHILDREN).",
        "",
        "**Stand-in hosts, timing only** (`bench/standin_agent.py`): every host is a port of a "
        "real OpenSSH sshd whose sessions replay the "
        f"{b_ctl.get('recorded_answers', '?')} agent answers recorded from one real push; the "
        "controller does all its own work (handshake, host key check, bundle, requests, "
        "parsing, events). Never used by a correctness test.",
        "",
        "| hosts | --parallel | wall s | wall / 1 host (paired) | controller CPU s/host | "
        "CPU s per extra host (b) | rest of machine CPU s/host (c) | Ansible CPU s/host | "
        "pyinfra CPU s/host |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    standin = b_ctl.get("standin") or {}
    for n, row in standin.items():
        lines.append(
            f"| {n} | {row['parallel']} | {_secs(row['wall'])} | {_ratio(row['ratio_to_first'])}"
            f" | {_secs(row['cpu_per_host'], 4)} | {marginal_cpu_s(standin, n)} | "
            f"{_secs(row.get('rest_cpu_per_host'), 4)} | (a) | (a) |"
        )
    lines += [
        "",
        f"(a) {NOT_IN_STANDIN}. (b) (CPU of N hosts − CPU of the smallest fleet) / (N − its "
        "size), medians: what one more host costs once start-up is paid. (c) The machine's busy "
        "CPU (/proc/stat) minus the controller's and the bench process's: the stand-in sshds "
        "and replays on the host cores, plus any other work on the machine; when it nears "
        "wall × host cores, the wall measures the stand-in, not the controller.",
        "",
    ]
    pinned = b_ctl.get("pinned") or {}
    if pinned.get("why"):
        lines += [f"Real hosts, pinned: not measured: {pinned['why']}.", ""]
    sizes = {n: tools for n, tools in pinned.items() if isinstance(tools, dict)}
    if sizes:
        lines += [
            "**Real sandbox hosts, pinned**: sshd, agents, service commands and the delay "
            "proxies on the host core(s); every tool started on the controller core.",
            "",
            "| hosts | tool | wall s | controller CPU s/host | × ours (CPU/host) |",
            "|---|---|---|---|---|",
        ]
        for n, tools in sizes.items():
            ours = (tools.get(DDTREE_A) or {}).get("cpu_per_host", {}).get("median_s")
            for name, row in tools.items():
                cpu = row["cpu_per_host"]["median_s"]
                times = f"{cpu / ours:.1f}×" if ours else "—"
                lines.append(
                    f"| {n} | {name} | {_secs(row['wall'])} | {_secs(row['cpu_per_host'], 4)} | "
                    f"{times} |"
                )
        for key in ("ansible_why", "pyinfra_why"):
            if pinned.get(key):
                lines.append(f"\n{pinned[key]}.")
        lines.append("")
    return lines


def marginal_cpu_s(standin: dict, n: str) -> str:
    """What one more host costs the controller: the rise of total CPU (medians) from the
    smallest size run to `n` hosts, per added host; "—" for the smallest size itself."""
    first = min(standin, key=int)
    if int(n) == int(first):
        return "—"
    total = {k: standin[k]["cpu_per_host"]["median_s"] * int(k) for k in (first, n)}
    return f"{(total[n] - total[first]) / (int(n) - int(first)):.4f}"


def _not_run(target: str, why: str) -> TargetRow:
    return TargetRow(target, "—", None, why)


def floor_rows(results: dict) -> list[TargetRow]:
    """Ours ≤ 1.5× the floor and pyinfra ≥ 3× ours, both at 25 ms."""
    pair = (results.get("A_floor") or {}).get(TARGET_RTT)
    floor_target = f"A: ≤ {FLOOR_FACTOR:g}× the floor at {TARGET_RTT} ms"
    peer_target = f"A: ≥ {PYINFRA_FACTOR:g}× faster than pyinfra at {TARGET_RTT} ms"
    if not pair:
        why = f"scenario A did not run the floor at {TARGET_RTT} ms"
        return [_not_run(floor_target, why), _not_run(peer_target, why)]
    floor = pair["ours_over_floor"]
    met = floor["median"] <= FLOOR_FACTOR
    why = "" if met else "the push's start-up, preflight and wind-down beyond the floor's ssh"
    rows = [TargetRow(floor_target, _ratio(floor), met, why)]
    peer = pair.get("pyinfra_over_ours")
    if peer is None:
        rows.append(_not_run(peer_target, pair.get("pyinfra_why", "pyinfra was not run")))
    else:
        met = peer["median"] >= PYINFRA_FACTOR
        rows.append(TargetRow(peer_target, _ratio(peer), met, "" if met else "see scenario A"))
    return rows


def controller_rows(results: dict) -> list[TargetRow]:
    """Controller CPU per host ≤ 1/20 of Ansible's (pinned hosts, largest size both ran) and
    the stand-in's wall at 256 hosts ≤ 4× one host."""
    b_ctl = results.get("B_ctl") or {}
    cpu_target = f"B-ctl: controller CPU per host ≤ 1/{ANSIBLE_CPU_FRACTION:g} of Ansible's"
    wall_target = f"B-ctl: wall at {FLEET_HOSTS} hosts ≤ {FLEET_FACTOR:g}× one host (--parallel 64)"
    if not b_ctl or b_ctl.get("why"):
        why = b_ctl.get("why", "scenario B-ctl was not run")
        return [_not_run(cpu_target, why), _not_run(wall_target, why)]
    rows = []
    pinned = b_ctl.get("pinned") or {}
    both = [
        n
        for n, tools in pinned.items()
        if isinstance(tools, dict) and DDTREE_A in tools and ANSIBLE_COLD in tools
    ]
    if not both:
        why = pinned.get("why") or pinned.get("ansible_why") or "Ansible was not run"
        rows.append(_not_run(cpu_target, why))
    else:
        n = max(both, key=int)
        ours = pinned[n][DDTREE_A]["cpu_per_host"]["median_s"]
        theirs = pinned[n][ANSIBLE_COLD]["cpu_per_host"]["median_s"]
        fraction = theirs / ours if ours else float("inf")
        met = fraction >= ANSIBLE_CPU_FRACTION
        measured = f"1/{fraction:.1f} ({ours:.3f} vs {theirs:.3f} s/host, {n} hosts)"
        why = "" if met else "see the pinned table (start-up is shared by few hosts)"
        rows.append(TargetRow(cpu_target, measured, met, why))
    standin = b_ctl.get("standin") or {}
    if FLEET_HOSTS not in standin or "1" not in standin:
        rows.append(_not_run(wall_target, f"{FLEET_HOSTS} and 1 hosts were not both run"))
    else:
        ratio = standin[FLEET_HOSTS]["ratio_to_first"]
        met = ratio["median"] <= FLEET_FACTOR
        why = "" if met else _fleet_why(standin, b_ctl)
        rows.append(TargetRow(wall_target, _ratio(ratio), met, why))
    return rows


def _fleet_why(standin: dict, b_ctl: dict) -> str:
    """Which side's CPU bounds the stand-in fleet's wall: each side has its cores alone, so
    N hosts take at least N × its CPU per host / its cores on either side."""
    row, one = standin[FLEET_HOSTS], standin["1"]
    n = int(FLEET_HOSTS)
    host_cores = len(str(b_ctl.get("host_cores", "1")).split(","))
    controller_s = row["cpu_per_host"]["median_s"] * n
    hosts_s = row["rest_cpu_per_host"]["median_s"] * n / host_cores
    allowed = FLEET_FACTOR * one["wall"]["median_s"]
    return (
        f"at {n} hosts the controller's core needs {controller_s:.1f} s of CPU and the "
        f"stand-in's sshd and replays {hosts_s:.1f} s on {host_cores} host core(s), against "
        f"{allowed:.1f} s allowed ({FLEET_FACTOR:g}× one host's {one['wall']['median_s']:.2f} s)"
        ": the host side bounds the wall on this machine; a real fleet's hosts have their own"
    )


def peer_rows(results: dict) -> list[TargetRow]:
    """Every issue-46 target row, in the order the doc lists them."""
    return [*floor_rows(results), *controller_rows(results)]
