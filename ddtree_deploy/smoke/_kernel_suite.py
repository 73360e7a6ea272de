"""The `gpu` smoke suite's kernel part: SGLang 0.5.23's own tree kernels against the host's
DDTree code on CUDA, as checks of a _suite.Suite (see gpu.py's docstring for what each
proves). Imports torch and the kernels only when the host's sglang is 0.5.23.
"""

from __future__ import annotations

import json
import os
import time
from types import ModuleType
from typing import Any

from _kernel_plan import CHECK_ORDER, SUITE_BUDGET_S, UNO_TREE, kernel_checks_apply

# _kernel_timings.TimingShapes: vocab, builder budgets (UNO's K = budget up to 44, as
# Q * K <= 2048), heads, head_dim, prefix, verify budgets, timed calls (bf16 on CUDA)
TIMING_SHAPES = (151_936, (16, 44), 32, 128, 1024, (16, 64), 5)

Check = tuple[bool, str]


def kernel_checks_here() -> tuple[bool, str]:
    """Return (run, why) for the imported sglang: _kernel_plan.kernel_checks_apply on its
    version and whether its package holds 0.5.23's UNO tree builder."""
    import sglang

    has_uno = os.path.isfile(os.path.join(os.path.dirname(sglang.__file__), UNO_TREE))
    return kernel_checks_apply(str(getattr(sglang, "__version__", "")), has_uno)


def _verdict(records: list[dict]) -> Check:
    """Return (every record ok, the records as JSON: one check's without its name and verdict,
    the timings' whole)."""
    ok = all(r["ok"] for r in records)
    if len(records) == 1 and records[0]["check"] in CHECK_ORDER:
        detail: Any = {k: v for k, v in records[0].items() if k not in ("check", "ok")}
    else:
        detail = records
    return ok, json.dumps(detail)


def run_kernel_checks(suite: Any, utils: ModuleType, budget_s: float = SUITE_BUDGET_S) -> None:
    """On sglang 0.5.23, run SGLang's own tree kernels against `utils` (the host's
    ddtree_utils) on CUDA: `kernel_import`, one `kernel_<name>` per check, `kernel_timings`.
    A check not started within `budget_s` seconds fails as not run."""
    if not kernel_checks_here()[0]:
        return
    import _kernel_checks
    from _kernel_timings import TimingShapes
    from _sglang_kernels import load_kernels

    loaded: dict[str, Any] = {}

    def load() -> Check:
        loaded["kernels"] = load_kernels(standin=False)
        return True, f"sglang {loaded['kernels'].version}: uno_tree, spec_tree, eagle, attention"

    if not suite.run("kernel_import", load):
        return
    started = time.monotonic()

    def within_budget(step: Any) -> Check:
        spent_s = time.monotonic() - started
        if spent_s > budget_s:
            return False, f"not run: the kernel checks spent {spent_s:.0f} s of {budget_s:.0f} s"
        return _verdict(step())

    shapes = TimingShapes(*TIMING_SHAPES)
    for name, step in _kernel_checks.kernel_steps(loaded["kernels"], utils, "cuda", False, shapes):
        suite.run(f"kernel_{name}", lambda step=step: within_budget(step))
