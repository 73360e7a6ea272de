"""Shared by the smoke scripts (shipped beside them): read the input, run checks, print.

A smoke script is run by the host's python with a JSON object on stdin and prints ONE
JSON line: {suite, passed, skipped, checks[], duration_s, details}. Exit 0 iff passed
(or skipped). Stdlib only, so it runs on any host python.
"""

import json
import sys
import time
import traceback


class Suite:
    """Collects named checks; `finish` prints the one result line and exits."""

    def __init__(self, name):
        self.name = name
        self.started = time.monotonic()
        self.checks = []
        try:
            raw = sys.stdin.read()
            self.input = json.loads(raw) if raw.strip() else {}
        except ValueError:
            self.input = {}

    def check(self, name, passed, detail=""):
        self.checks.append({"name": name, "passed": bool(passed), "detail": str(detail)[-2000:]})
        return passed

    def run(self, name, fn):
        """Record fn() -> (passed, detail); an exception fails the check with its traceback."""
        try:
            passed, detail = fn()
        except Exception:  # the point is to report, not to crash
            passed, detail = False, traceback.format_exc()[-1500:]
        return self.check(name, passed, detail)

    def finish(self, skipped_reason=None):
        failed = [c for c in self.checks if not c["passed"]]
        result = {
            "suite": self.name,
            "passed": not failed and skipped_reason is None,
            "skipped": skipped_reason is not None,
            "checks": self.checks,
            "duration_s": round(time.monotonic() - self.started, 3),
            "details": skipped_reason
            or "; ".join(f"{c['name']}: {c['detail'][:300]}" for c in failed),
        }
        sys.stdout.write(json.dumps(result) + "\n")
        sys.stdout.flush()
        sys.exit(0 if result["passed"] or result["skipped"] else 1)
