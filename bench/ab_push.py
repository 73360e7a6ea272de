"""What a change saved: scenario A's push (suites [], 4 hosts) by the tree at a git revision
against this tree, interleaved pair by pair, at each RTT.

Usage: ``python bench/ab_push.py --before REV [--runs 7] [--rtts-ms 25 100] [--hosts 4]
[--workdir /tmp/ddtree-bench-ab]`` (root). Checks REV out into a temporary git worktree and
runs the same bench entry (bench/ddtree_push.py, this tree's) with that worktree first on
PYTHONPATH, so `import ddtree_deploy` and the agent it ships are REV's; "after" is this
tree. Each pair runs back to back, which goes first alternates, every run deploys from the
same reset hosts and is checked (result files, health). Prints per RTT the medians of each
side, the median of the per-pair savings (before - after) with their spread, and the
per-pair ratio; bench/NOTES.md quotes it.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from harness import REPO, log, start_bench_hosts
from run_benchmarks import check_deployed, variants
from summary import paired_ratios
from tools import ToolRun, run_ddtree


def _worktree(rev: str, parent: Path) -> Path:
    """A detached worktree of `rev` under `parent` (removed by the caller's cleanup)."""
    path = parent / "before"
    subprocess.run(
        ["git", "-C", str(REPO), "worktree", "add", "-q", "--detach", str(path), rev],
        check=True,
    )
    return path


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", required=True, help="git revision measured as 'before'")
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--rtts-ms", type=float, nargs="+", default=[25.0, 100.0])
    parser.add_argument("--hosts", type=int, default=4)
    parser.add_argument("--workdir", type=Path, default=Path("/tmp/ddtree-bench-ab"))
    args = parser.parse_args()
    scratch = Path(tempfile.mkdtemp(prefix="ab-push-"))
    before = _worktree(args.before, scratch)
    dirs = variants(args.workdir / "patchsets")
    bench = start_bench_hosts(args.workdir, args.hosts, dirs["none"], args.rtts_ms[0] / 1000)
    inventory = bench.write_ddtree_inventory(args.hosts)
    sides = {"before": {"PYTHONPATH": str(before)}, "after": {}}
    try:
        for rtt_ms in args.rtts_ms:
            bench.set_rtt(rtt_ms / 1000)
            taken: dict[str, list[ToolRun]] = {side: [] for side in sides}
            for env in sides.values():  # untimed: cold caches, each side's bytecode
                bench.reset(args.hosts)
                run_ddtree(bench, inventory, dirs["none"], env=env)
            for i in range(args.runs):
                order = list(sides) if i % 2 == 0 else list(reversed(sides))
                for side in order:
                    bench.reset(args.hosts)
                    taken[side].append(run_ddtree(bench, inventory, dirs["none"], env=sides[side]))
                    check_deployed(bench, args.hosts)
                log(f"{rtt_ms:g} ms pair {i + 1}/{args.runs}: " + ", ".join(
                    f"{s} {taken[s][-1].wall_s:.3f} s" for s in sides))  # fmt: skip
            report(rtt_ms, taken)
    finally:
        bench.stop()
        subprocess.run(["git", "-C", str(REPO), "worktree", "remove", "--force", str(before)])
    return 0


def report(rtt_ms: float, taken: dict[str, list[ToolRun]]) -> None:
    """Print one RTT's medians, per-pair savings and ratios."""
    before = [r.wall_s for r in taken["before"]]
    after = [r.wall_s for r in taken["after"]]
    saved = [b - a for b, a in zip(before, after, strict=True)]
    ratio = paired_ratios(before, after)
    cpu = {s: round(statistics.median(r.cpu_s for r in runs), 2) for s, runs in taken.items()}
    print(
        f"{rtt_ms:g} ms, {len(saved)} pairs: before median {statistics.median(before):.3f} s, "
        f"after {statistics.median(after):.3f} s; saved median {statistics.median(saved):.3f} s "
        f"({min(saved):+.3f} .. {max(saved):+.3f}); before/after {ratio['median']}x "
        f"({ratio['min']}-{ratio['max']}); CPU {cpu['before']} / {cpu['after']} s",
        flush=True,
    )


if __name__ == "__main__":
    sys.exit(main())
