"""Where SGLang's own tree-kernel checks run, in what order, and the record each one returns.

Stdlib only (no torch), so the choice is unit-testable anywhere. The checks themselves are in
_kernel_checks.py, _step_checks.py and _toy_decode.py; the `gpu` smoke suite and
bench/gpu_check.py (`make gpu-check`) run them.
"""

import time

KERNEL_VERSION = "0.5.23"  # the sglang whose kernels (and their call signatures) they check
UNO_TREE = "kernels/ops/speculative/uno_tree.py"  # inside the sglang package directory
CHECK_ORDER = (
    "tree_equality",
    "tree_links",
    "verify_greedy",
    "attention",
    "accepted_kv_slots",
    "toy_decode",
)
SUITE_BUDGET_S = 300.0  # the gpu suite starts no kernel check after this many seconds


def kernel_checks_apply(sglang_version, has_uno_tree):
    """Return (run, why): run is True only for the sglang the kernel checks are written for.

    sglang_version: the installed ``sglang.__version__``; has_uno_tree: whether its package
    directory holds UNO_TREE (0.5.23's tree kernels). Another version's kernels may take
    other arguments, so the checks are not run there; why says which condition decided.
    """
    if sglang_version.split("+")[0] != KERNEL_VERSION:
        return False, f"sglang {sglang_version}: the kernel checks are written for {KERNEL_VERSION}"
    if not has_uno_tree:
        return False, f"sglang {sglang_version} has no {UNO_TREE}"
    return True, f"sglang {sglang_version} with {UNO_TREE}"


def record(name, started, ok, caught, cases, **info):
    """Return one check's JSON record: `ok` only when the kernels agreed with the reference
    (`agrees`) AND the check's negative control was caught (`control_caught`).

    started: the check's time.perf_counter() at its start; cases: how many inputs it compared.
    """
    return {
        "check": name,
        "ok": bool(ok and caught),
        "agrees": bool(ok),
        "control_caught": bool(caught),
        "cases": cases,
        "seconds": round(time.perf_counter() - started, 3),
        **info,
    }
