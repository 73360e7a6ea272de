"""The DDTree builder against the reference's algorithm, side by side in one process.

Usage: python3 bench/builder_vs_reference.py [--repeats N] [--threads 1 2] [--budgets ...]
[--json FILE]. For each torch thread count and budget, on the same CPU logits (L=15,
V=151936, N(0, 4^2)), the calls take turns: ours (ddtree 1.1.12), the reference
(bench/ddtree_reference.py), ddtree 1.0.0's builder, then the next round from the next one,
so load drift and the order of the calls hit all alike.
Prints one row per (threads, budget): medians in ms with min-max, the ratio ours / reference
(medians; min-max over the per-round ratios) and met/missed against TARGET_RATIO. The load
average is read before and after each row. `run()` returns the same as a dict.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

import torch

BENCH = Path(__file__).resolve().parent
REPO = BENCH.parent
sys.path.insert(0, str(REPO))
from tests.support import load_module, utils_file  # noqa: E402 - the product's source resolver

DEPTHS = 15
VOCAB = 151_936
BUDGETS = (16, 64, 256, 1024)
THREADS = (1, 2)
TARGET_RATIO = 0.8
# The one-read builder whose heap reads only what it pops (shared by 2.1.2); 1.0.0's (1.1.0,
# 2.0.0) is timed beside it.
OURS = "1.1.12"


def spread(samples_ms: list[float]) -> dict[str, float]:
    """Return median, min and max of samples (ms), rounded to µs."""
    return {
        "median": round(statistics.median(samples_ms), 3),
        "min": round(min(samples_ms), 3),
        "max": round(max(samples_ms), 3),
    }


def load_builders() -> dict[str, Callable[[torch.Tensor, int], object]]:
    """Return the three builders by role: ours, ref, old."""
    ddtree = REPO / "patchsets" / "ddtree"
    ours = load_module("_bench_fast_ddtree_utils", utils_file(ddtree / OURS))
    old = load_module("_bench_ddtree_utils", utils_file(ddtree / "1.0.0"))
    reference = load_module("_bench_ddtree_reference", BENCH / "ddtree_reference.py")
    return {
        "ours": ours.build_ddtree_tree_from_logits,
        "ref": reference.build_reference_tree,
        "old": old.build_ddtree_tree_from_logits,
    }


def time_row(
    builders: dict[str, Callable[[torch.Tensor, int], object]],
    logits: torch.Tensor,
    budget: int,
    repeats: int,
) -> dict[str, list[float]]:
    """Return ms per call for each builder, taking turns, after one warm-up call each.

    Each round starts with the next builder (ours, ref, old; then ref, old, ours; ...): on
    two torch threads the call that follows another builder's runs measurably slower or faster
    than the one after it (its worker threads and caches as the previous call left them), so
    a fixed order would favour one builder.
    """
    for build in builders.values():
        build(logits, budget)
    samples: dict[str, list[float]] = {role: [] for role in builders}
    order = list(builders.items())
    for round_number in range(repeats):
        start = round_number % len(order)
        for role, build in order[start:] + order[:start]:
            started = time.perf_counter()
            build(logits, budget)
            samples[role].append((time.perf_counter() - started) * 1e3)
    return samples


def run(
    repeats: int = 15,
    threads: tuple[int, ...] = THREADS,
    budgets: tuple[int, ...] = BUDGETS,
    seed: int = 0,
) -> dict:
    """Time ours vs the reference (and 1.0.0's builder); return the comparison.

    Result: {"shape": {"depths", "vocab"}, "target_ratio", "repeats", "torch", "ours",
    "cpu_count", "rows": [{"threads", "budget", "ours_ms", "ref_ms", "old_ms" (each
    {"median", "min", "max"}), "ratio" (median ours / median ref), "ratio_min",
    "ratio_max" (over rounds), "old_ratio", "met" (ratio <= target_ratio), "loadavg_before",
    "loadavg_after" (1/5/15 min)}], "met" (every row)}. Restores torch's thread count.
    """
    builders = load_builders()
    logits = torch.randn(DEPTHS, VOCAB, generator=torch.Generator().manual_seed(seed)) * 4.0
    before = torch.get_num_threads()
    rows = []
    try:
        for count in threads:
            torch.set_num_threads(count)
            for budget in budgets:
                load_before = [round(x, 2) for x in os.getloadavg()]
                samples = time_row(builders, logits, budget, repeats)
                rounds = [o / r for o, r in zip(samples["ours"], samples["ref"], strict=True)]
                ours_ms, ref_ms = spread(samples["ours"]), spread(samples["ref"])
                old_ms = spread(samples["old"])
                ratio = ours_ms["median"] / ref_ms["median"]
                rows.append(
                    {
                        "threads": count,
                        "budget": budget,
                        "ours_ms": ours_ms,
                        "ref_ms": ref_ms,
                        "old_ms": old_ms,
                        "ratio": round(ratio, 3),
                        "ratio_min": round(min(rounds), 3),
                        "ratio_max": round(max(rounds), 3),
                        "old_ratio": round(old_ms["median"] / ref_ms["median"], 3),
                        "met": ratio <= TARGET_RATIO,
                        "loadavg_before": load_before,
                        "loadavg_after": [round(x, 2) for x in os.getloadavg()],
                    }
                )
    finally:
        torch.set_num_threads(before)
    return {
        "shape": {"depths": DEPTHS, "vocab": VOCAB},
        "target_ratio": TARGET_RATIO,
        "repeats": repeats,
        "torch": torch.__version__,
        "ours": f"ddtree {OURS}",
        "cpu_count": os.cpu_count(),
        "rows": rows,
        "met": all(row["met"] for row in rows),
    }


def format_table(result: dict) -> list[str]:
    """Return the comparison as text lines, one per (threads, budget)."""
    lines = [
        f"builder vs reference: L={result['shape']['depths']} V={result['shape']['vocab']}, "
        f"{result['repeats']} interleaved rounds, torch {result['torch']}, "
        f"target ours/ref <= {result['target_ratio']}",
        "thr budget   ours ms (min-max)         ref ms (min-max)          ratio (min-max)"
        "      1.0.0/ref  load 1m    verdict",
    ]
    for row in result["rows"]:
        ours, ref = row["ours_ms"], row["ref_ms"]
        lines.append(
            f"{row['threads']:>3} {row['budget']:>6}   "
            f"{ours['median']:7.2f} ({ours['min']:.2f}-{ours['max']:.2f}){'':<4}"
            f"{ref['median']:7.2f} ({ref['min']:.2f}-{ref['max']:.2f}){'':<4}"
            f"{row['ratio']:.2f} ({row['ratio_min']:.2f}-{row['ratio_max']:.2f})   "
            f"{row['old_ratio']:.2f}       "
            f"{row['loadavg_before'][0]:.1f}-{row['loadavg_after'][0]:.1f}    "
            f"{'met' if row['met'] else 'missed'}"
        )
    return lines


def main() -> None:
    """Parse options, run, print the table (and write JSON when asked)."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeats", type=int, default=15)
    parser.add_argument("--threads", type=int, nargs="+", default=list(THREADS))
    parser.add_argument("--budgets", type=int, nargs="+", default=list(BUDGETS))
    parser.add_argument("--json", type=Path, default=None, help="also write the result here")
    args = parser.parse_args()
    result = run(args.repeats, tuple(args.threads), tuple(args.budgets))
    print("\n".join(format_table(result)))
    if args.json:
        args.json.write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
