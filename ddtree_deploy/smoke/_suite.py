"""Shared by the smoke scripts (shipped beside them): read the input, run checks, print.

A smoke script is run by the host's python with a JSON object on stdin and gives ONE
JSON result: {suite, passed, skipped, checks[], duration_s, details}, written to the file
$DDTREE_SMOKE_RESULT names (the agent's smoke op: out of band, so text a host's python
prints on stdout cannot spoil it) and printed on stdout as a line (for a person running
it by hand). Exit 0 iff passed (or skipped). Stdlib only, so it runs on any host python.
"""

import json
import os
import sys
import time
import traceback

RESULT_ENV = "DDTREE_SMOKE_RESULT"  # the file the result goes to (agent/host/ops_smoke.py)


def read_request():
    """Return the JSON object on stdin; {} when stdin is a terminal, empty or not an object."""
    if sys.stdin is None or sys.stdin.isatty():
        return {}
    try:
        raw = sys.stdin.read()
        request = json.loads(raw) if raw.strip() else {}
    except ValueError:
        return {}
    return request if isinstance(request, dict) else {}


class Suite:
    """Collects named checks; `finish` prints the one result line and exits.

    `request` is the suite's input (default: read from stdin). `where`, when set, names the
    code under test and leads the failure summary.
    """

    def __init__(self, name, request=None):
        self.name = name
        self.started = time.monotonic()
        self.checks = []
        self.input = read_request() if request is None else request
        self.where = ""
        self.crash = ""  # "suite crashed: <traceback>" once the suite body raised
        self.finished = False
        self.secrets = []  # text never to print (the server's API key): redacted by finish

    def check(self, name, passed, detail=""):
        self.checks.append({"name": name, "passed": bool(passed), "detail": str(detail)[-2000:]})
        return passed

    def run(self, name, fn):
        """Record fn() -> (passed, detail); an exception fails the check: its type and message
        on the first line (what summaries show), then its traceback."""
        try:
            passed, detail = fn()
        except Exception as exc:  # the point is to report, not to crash
            passed = False
            detail = f"{type(exc).__name__}: {exc}\n{traceback.format_exc()[-1500:]}"
        return self.check(name, passed, detail)

    def run_body(self, body):
        """Call body(self), then `finish`. A crash anywhere in body (an import, the input)
        fails the suite with its traceback instead of ending without a result line."""
        try:
            body(self)
        except BaseException as exc:  # always answer with the JSON line
            if isinstance(exc, SystemExit) and self.finished:
                raise
            self.crash = "suite crashed: " + traceback.format_exc()[-1500:]
        self.finish()

    def redact(self, text):
        """Return `text` with every secret (also in its JSON-escaped form) replaced."""
        for secret in filter(None, self.secrets):
            for form in (secret, json.dumps(secret)[1:-1]):
                text = text.replace(form, "[redacted]")
        return text

    def finish(self, skipped_reason=None):
        failed = [c for c in self.checks if not c["passed"]]
        summary = "; ".join(f"{c['name']}: {c['detail'][:300]}" for c in failed)
        if summary and self.where:
            summary = f"{self.where}: {summary}"
        result = {
            "suite": self.name,
            "passed": not failed and not self.crash and skipped_reason is None,
            "skipped": skipped_reason is not None,
            "checks": self.checks,
            "duration_s": round(time.monotonic() - self.started, 3),
            "details": skipped_reason or self.crash or summary,
        }
        text = self.redact(json.dumps(result))
        where = os.environ.get(RESULT_ENV)
        if where:  # the agent's private run dir: created here, never there before
            fd = os.open(where, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
            with os.fdopen(fd, "w", encoding="utf-8") as fh:
                fh.write(text)
        sys.stdout.write(text + "\n")
        sys.stdout.flush()
        self.finished = True
        sys.exit(0 if result["passed"] or result["skipped"] else 1)
