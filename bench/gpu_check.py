"""GPU check of SGLang's own tree kernels against DDTree (`make gpu-check`), plus timings.

A thin CLI over the kernel checks shipped with the `gpu` smoke suite
(ddtree_deploy/smoke/_kernel_checks.py, _kernel_timings.py): the same checks on CUDA (real
Triton, real flashinfer top-k, and sglang's JIT CUDA build_tree kernel beside the Triton
one), the full shapes included (V=151936), with ddtree 1.1.9's stored ddtree_utils.py as the
oracle, then the timings `uno_vs_ours` (V=151936, L=15, budgets 16/64/256/1024) and
`masked_verify` (batch 8, prefix 1024, 32 heads of 128, bf16, budgets 16/64/127), then the
hybrid path (bench/hybrid_tree_verify.py): sglang's conv-update and GDN recurrent verify
kernels walking a DDTree's tree links, against a per-node torch reference, with a chain scan
as the control that must miss.

One JSON line per check or timing on stdout. Needs torch, triton and sglang 0.5.23 in the
python that runs it (no network). Without CUDA it says so and exits 2, unless --self-test:
then it runs everything on the CPU under TRITON_INTERPRET=1 at tiny timing shapes (what
tests/kernels/test_kernels.py runs so this script cannot rot).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SMOKE_DIR = REPO / "ddtree_deploy" / "smoke"  # the shipped checks import each other by name
ORACLE_VERSION = "1.1.9"
ORACLE_PATH = "sglang/srt/speculative/ddtree_utils.py"
# _kernel_timings.TimingShapes: vocab, builder budgets, heads, head_dim, prefix, verify
# budgets, timed calls (on CUDA bf16; the self-test's tiny shapes only keep the path alive)
GPU_CHECK_SHAPES = (151_936, (16, 64, 256, 1024), 32, 128, 1024, (16, 64, 127), 20)
SELF_TEST_SHAPES = (2000, (16,), 2, 16, 32, (16,), 1)


def oracle_file() -> Path:
    """Return where the patchset store keeps ddtree 1.1.9's ddtree_utils.py."""
    version_dir = REPO / "patchsets" / "ddtree" / ORACLE_VERSION
    lock = json.loads((version_dir / "patchset.lock.json").read_text())
    entry = lock["files"][ORACLE_PATH]
    own = version_dir / entry["source"]
    if own.is_file():
        return own
    return REPO / "patchsets" / "ddtree" / "shared" / "sha256" / entry["result_sha256"]


def main(argv: list[str] | None = None) -> int:
    """Run the checks and timings; exit 0 when every check is ok, 1 if not, 2 without CUDA."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--self-test", action="store_true", help="CPU, TRITON_INTERPRET=1, tiny shapes"
    )
    args = parser.parse_args(argv)
    if args.self_test:
        os.environ["TRITON_INTERPRET"] = "1"  # before triton is imported
    import torch

    if not args.self_test and not torch.cuda.is_available():
        print(
            "gpu-check needs CUDA (torch.cuda.is_available() is False); "
            "--self-test runs it on the CPU under TRITON_INTERPRET=1",
            file=sys.stderr,
        )
        return 2
    sys.path.insert(0, str(SMOKE_DIR))
    import _kernel_checks
    from _kernel_timings import TimingShapes
    from _sglang_kernels import load_kernels

    device = "cpu" if args.self_test else "cuda"
    where = torch.cuda.get_device_name() if device == "cuda" else "cpu (TRITON_INTERPRET=1)"
    kernels = load_kernels(standin=args.self_test)
    oracle = _kernel_checks.load_oracle(oracle_file())
    shapes = SELF_TEST_SHAPES if args.self_test else GPU_CHECK_SHAPES
    failed = 0
    for _name, step in _kernel_checks.kernel_steps(
        kernels, oracle, device, not args.self_test, TimingShapes(*shapes)
    ):
        for rec in step():
            failed += emit(rec, where)
    import hybrid_tree_verify  # bench/, this script's own dir: sys.path[0]

    failed += emit(hybrid_tree_verify.check(device), where)
    return 1 if failed else 0


def emit(rec: dict, where: str) -> bool:
    """Print one record as a JSON line (the device named); True when it failed."""
    rec["device"] = where
    print(json.dumps(rec), flush=True)
    return not rec["ok"]


if __name__ == "__main__":
    sys.exit(main())
