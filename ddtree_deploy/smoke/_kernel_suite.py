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

from _kernel_plan import SUITE_BUDGET_S, UNO_TREE, kernel_checks_apply

VOCAB = 151_936
TIMING_BUDGETS = (16, 44)  # UNO's K = budget up to 44 (Q * K <= 2048): our tree for sure
TIMED_CALLS = 5

Check = tuple[bool, str]


def kernel_checks_here() -> tuple[bool, str]:
    """Return (run, why) for the imported sglang: _kernel_plan.kernel_checks_apply on its
    version and whether its package holds 0.5.23's UNO tree builder."""
    import sglang

    has_uno = os.path.isfile(os.path.join(os.path.dirname(sglang.__file__), UNO_TREE))
    return kernel_checks_apply(str(getattr(sglang, "__version__", "")), has_uno)


def _record_check(record: dict) -> Check:
    """Return a kernel check's (ok, its record as JSON without the name and verdict)."""
    detail = {k: v for k, v in record.items() if k not in ("check", "ok")}
    return bool(record["ok"]), json.dumps(detail)


def _time_kernels(kernels: Any, utils: ModuleType) -> Check:
    """Time UNO vs our builder (V=151936, L=15) and tree-masked verify attention (batch 8,
    prefix 1024, 32 heads of 128, bf16); fails when a record is not ok or UNO refused."""
    import _kernel_timings as timings

    records = timings.time_builders(kernels, utils, "cuda", VOCAB, TIMING_BUDGETS, TIMED_CALLS)
    records += timings.time_masked_verify(
        kernels, "cuda", 32, 128, 1024, TIMING_BUDGETS, TIMED_CALLS
    )
    failed = [r for r in records if not r["ok"] or "uno_refused" in r]
    return not failed, json.dumps(records)


def run_kernel_checks(suite: Any, utils: ModuleType, budget_s: float = SUITE_BUDGET_S) -> None:
    """On sglang 0.5.23, run SGLang's own tree kernels against `utils` (the host's
    ddtree_utils) on CUDA: `kernel_import`, one `kernel_<name>` per check, `kernel_timings`.
    A check not started within `budget_s` seconds fails as not run."""
    if not kernel_checks_here()[0]:
        return
    import _kernel_checks
    from _sglang_kernels import load_kernels

    loaded: dict[str, Any] = {}

    def load() -> Check:
        loaded["kernels"] = load_kernels(standin=False)
        return True, f"sglang {loaded['kernels'].version}: uno_tree, spec_tree, eagle, attention"

    if not suite.run("kernel_import", load):
        return
    kernels, started = loaded["kernels"], time.monotonic()

    def within_budget(check: Any) -> Check:
        spent_s = time.monotonic() - started
        if spent_s > budget_s:
            return False, f"not run: the kernel checks spent {spent_s:.0f} s of {budget_s:.0f} s"
        return check()

    for name in _kernel_checks.check_names(kernels):
        suite.run(
            f"kernel_{name}",
            lambda n=name: within_budget(
                lambda: _record_check(_kernel_checks.run_check(kernels, utils, "cuda", n, False))
            ),
        )
    suite.run("kernel_timings", lambda: within_budget(lambda: _time_kernels(kernels, utils)))
