"""The smoke op: the patchset's suite scripts, run by the host's python beside their
support modules, each printing one JSON result line."""

import json
import os
import subprocess
import sys
import time

from .files import write_atomic
from .wire import Code, OpFailed
from .wire_results import SmokeResult


def op_smoke(ctx, args):
    """Run each suite script with this python (its input as JSON on stdin; it prints one
    JSON result line); return SmokeResult.

    Support modules are written beside the scripts in <state_dir>/smoke (0700). Raises
    OpFailed(smoke_failed) with every suite's result when one neither passed nor skipped.
    """
    work = os.path.join(ctx.state_dir, "smoke")
    os.makedirs(work, mode=0o700, exist_ok=True)
    for name, source in args.support.items():  # modules the scripts import
        write_atomic(os.path.join(work, os.path.basename(name)), source.encode(), 0o600)
    results = [_run_suite(work, suite) for suite in args.suites]
    outcome = SmokeResult(suites=results)
    failed = [_why_failed(r) for r in outcome.failed()]
    if failed:
        message = "smoke failed: " + "; ".join(failed)
        raise OpFailed(Code.SMOKE_FAILED, message, outcome.to_dict())
    return outcome


def _run_suite(work, suite):
    """Run one suite script from `work`; return its result dict (suite, duration_s added)."""
    script = os.path.join(work, "%s.py" % suite.name)
    write_atomic(script, suite.source.encode(), 0o600)
    started = time.monotonic()
    try:
        done = subprocess.run(
            [sys.executable, script],
            input=json.dumps(suite.input),
            capture_output=True,
            text=True,
            timeout=suite.timeout_s,
            # no world-readable __pycache__ in the 0700 state dir, no .pyc in site-packages
            env=dict(os.environ, PYTHONDONTWRITEBYTECODE="1"),
        )
        lines = [ln for ln in done.stdout.splitlines() if ln.startswith("{")]
        result = json.loads(lines[-1]) if lines else None
        if not isinstance(result, dict):
            details = "no JSON result line; stderr: " + done.stderr[-1500:]
            result = {"passed": False, "details": details}
    except subprocess.TimeoutExpired:
        result = {"passed": False, "details": "timed out after %ss" % suite.timeout_s}
    except ValueError as exc:
        result = {"passed": False, "details": "unreadable result line: %s" % exc}
    result.setdefault("suite", suite.name)
    result.setdefault("duration_s", round(time.monotonic() - started, 3))
    return result


def _why_failed(result):
    """Return `suite: first failed check: first line of its detail` (what a summary shows)."""
    checks = [c for c in result.get("checks") or [] if not c.get("passed")]
    if not checks:
        return "%s: %s" % (result.get("suite"), str(result.get("details") or "failed")[:200])
    lines = str(checks[0].get("detail") or "").strip().splitlines() or [""]
    return "%s: %s: %s" % (result.get("suite"), checks[0].get("name"), lines[0][:200])
