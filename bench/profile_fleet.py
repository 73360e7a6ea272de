"""Where a fleet push spends controller time: wall, CPU per host and the hottest functions.

Usage: ``python bench/profile_fleet.py [--hosts 1 16] [--rtt-ms 25] [--runs 1] [--top 25]
[--workdir /tmp/ddtree-bench-profile]`` (root). Starts max(--hosts) bench hosts, then for each
size runs scenario A's push (suites []) once per run with every controller thread under
cProfile (bench/ddtree_push.py's hook) and prints wall s, controller CPU s per host and the
functions with the most own time, summed over threads. Profiling slows the controller, so
compare the profiles, not their wall times, with `make bench`'s.
"""

from __future__ import annotations

import argparse
import io
import pstats
import sys
from pathlib import Path

from harness import log, start_bench_hosts
from run_benchmarks import check_deployed, variants
from tools import run_ddtree


def hottest(profile: Path, top: int) -> str:
    """The `top` functions by own time (tottime), as pstats prints them."""
    out = io.StringIO()
    stats = pstats.Stats(str(profile), stream=out)
    stats.sort_stats("tottime").print_stats(top)
    text = out.getvalue()
    return text[text.find("   ncalls") :]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hosts", type=int, nargs="+", default=[1, 16])
    parser.add_argument("--rtt-ms", type=float, default=25.0)
    parser.add_argument("--runs", type=int, default=1)
    parser.add_argument("--top", type=int, default=25)
    parser.add_argument("--no-profile", action="store_true", help="time only (no cProfile)")
    parser.add_argument("--workdir", type=Path, default=Path("/tmp/ddtree-bench-profile"))
    args = parser.parse_args()
    dirs = variants(args.workdir / "patchsets")
    bench = start_bench_hosts(args.workdir, max(args.hosts), dirs["none"], args.rtt_ms / 1000)
    try:
        inventories = {n: bench.write_ddtree_inventory(n) for n in args.hosts}
        for i in range(args.runs):
            for n in args.hosts:
                bench.reset(n)
                profile = None if args.no_profile else args.workdir / f"push-{n}.pstats"
                run = run_ddtree(bench, inventories[n], dirs["none"], profile=profile)
                check_deployed(bench, n)
                log(
                    f"run {i + 1}: {n} hosts: wall {run.wall_s:.2f} s, controller CPU "
                    f"{run.cpu_s:.2f} s = {run.cpu_s / n:.3f} s/host, load {run.load_1m:.1f}"
                )
                if profile is not None:
                    print(f"== {n} hosts, run {i + 1}\n{hottest(profile, args.top)}")
    finally:
        bench.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
