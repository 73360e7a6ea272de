"""The smoke op: the patchset's suite scripts, run by the host's python beside their
support modules, each leaving one JSON result in a file of its own.

Isolated: each suite runs as `python -I -B` (no cwd, script dir, PYTHON* variables or user
site on sys.path; PYTHONPATH's absolute entries, which the agent's own python imports
from, are put back) from a fresh private dir (mkdtemp: 0700, this user's) that holds only
what this op wrote: a module planted in the state dir, the agent's cwd or the login's home
is never imported by a suite that runs as root. Out of band: a suite writes its result to
the file named by $DDTREE_SMOKE_RESULT (_suite.py), so whatever a host's python prints on
stdout (a .pth, a sitecustomize, a login banner: text without a newline would glue onto a
result line) changes nothing; it is quoted, cleaned and bounded, when a suite gives no
result. The suites run one after another; a `beside` suite (SmokeArgs.beside) runs at the
same time in a process of its own, with its own dir, time limit and result file.
"""

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

from .entries import run_entry
from .files import write_atomic
from .wire import Code, OpFailed, OpName
from .wire_results import SmokeResult

RESULT_ENV = "DDTREE_SMOKE_RESULT"  # where _suite.py writes the suite's result
STDOUT_TAIL_CHARS, STDERR_TAIL_CHARS = 500, 1500
# argv after -c: the private dir (first on sys.path: the support modules), the script, then
# PYTHONPATH's absolute entries (-I drops them; the agent itself imports from them)
LAUNCHER = (
    "import runpy,sys;d,s=sys.argv[1:3];sys.path[0:0]=[d]+sys.argv[3:];sys.argv=[s];"
    "runpy.run_path(s,run_name='__main__')"
)


def op_smoke(ctx, args):
    """Run each suite script with this python (its input as JSON on stdin; its result in a
    file); return SmokeResult, its suites in the order given.

    Scripts and support modules are written to a fresh private dir inside the state dir
    (main.py checked it is this user's alone), removed afterwards. The `beside` suites run
    while the others do (run_suites) and never fail this op (SmokeResult.beside says how
    they ended). Raises OpFailed(smoke_failed) with every suite's result when one neither
    passed nor skipped, and when there is no suite at all (a request that checks nothing
    proves nothing). Raises OpFailed(bad_args) when two suites of one name have different
    sources (one script file each name).
    """
    if not args.suites:
        message = "smoke failed: no suites to run (the request named none)"
        raise OpFailed(Code.SMOKE_FAILED, message, SmokeResult(suites=[]).to_dict())
    everything = list(args.suites) + list(args.beside)
    scripts = {}  # type: dict
    for suite in everything:
        if scripts.setdefault(suite.name, suite.source) != suite.source:
            raise OpFailed(Code.BAD_ARGS, "smoke: two suites named %r differ" % suite.name)
    ctx.ensure_state_dir()
    work = tempfile.mkdtemp(prefix="smoke-", dir=ctx.state_dir)
    try:
        for name, source in args.support.items():  # modules the scripts import
            write_atomic(os.path.join(work, os.path.basename(name)), source.encode(), 0o600)
        for name, source in scripts.items():
            write_atomic(os.path.join(work, "%s.py" % name), source.encode(), 0o600)
        mine, beside = run_suites(work, args.suites, args.beside)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    entry = _beside_entry(beside) if beside else None
    return _judged([result for result, _ in mine], entry)


def run_suites(work, suites, beside=()):
    """Run each suite (its script already in `work`): `suites` one after another and,
    at the same time, each `beside` suite in a process of its own (a thread waits on each);
    return ([(result, wall_s)] of `suites`, the same of `beside`), each in the order given.
    """
    if not beside:
        return [_run_suite(work, suite) for suite in suites], []
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(max_workers=len(beside)) as pool:
        aside = [pool.submit(_run_suite, work, suite) for suite in beside]
        mine = [_run_suite(work, suite) for suite in suites]
        return mine, [future.result() for future in aside]


def _judged(results, beside=None):
    """SmokeResult of `results` (+ `beside`); raises OpFailed(smoke_failed) carrying it
    when a suite neither passed nor skipped."""
    outcome = SmokeResult(suites=results, beside=beside)
    failed = [_why_failed(r) for r in outcome.failed()]
    if failed:
        message = "smoke failed: " + "; ".join(failed)
        raise OpFailed(Code.SMOKE_FAILED, message, outcome.to_dict())
    return outcome


def _beside_entry(ran):
    """The entry a smoke op of just these suites answers (entries.run_entry: ok, or
    failed with smoke_failed), its duration their wall time (they ran at once)."""
    entry, _output = run_entry(OpName.SMOKE, lambda: _judged([result for result, _ in ran]))
    entry["duration_s"] = round(max(wall_s for _, wall_s in ran), 4)
    return entry


def suite_argv(work, script):
    """The argv running `script` isolated, with `work` (the support modules) and the
    absolute entries of this agent's PYTHONPATH (as the agent's own python has them) on
    sys.path, and this python's bytecode prefix (PYTHONPYCACHEPREFIX, which -I drops, as
    -X pycache_prefix): a suite reads bytecode where the host's python does, e.g. in a
    container whose files are mounted over stale bytecode (docs/kubernetes.md)."""
    env_path = os.environ.get("PYTHONPATH", "").split(os.pathsep)
    prefix = getattr(sys, "pycache_prefix", None)
    flags = ["-X", "pycache_prefix=" + prefix] if prefix else []
    return [sys.executable, "-I", "-B", *flags, "-c", LAUNCHER, work, script] + [
        p for p in env_path if os.path.isabs(p)
    ]


def _run_suite(work, suite):
    """Run one suite's script (written to `work`) from a fresh dir of its own under
    `work`; return (its result dict, suite and duration_s added; wall seconds)."""
    script = os.path.join(work, "%s.py" % suite.name)
    cwd = tempfile.mkdtemp(prefix="run-", dir=work)
    result_path = os.path.join(cwd, "result.json")
    started = time.monotonic()
    try:
        done = subprocess.run(
            suite_argv(work, script),
            input=json.dumps(suite.input),
            capture_output=True,
            text=True,
            errors="replace",
            timeout=suite.timeout_s,
            cwd=cwd,
            env=dict(os.environ, PYTHONDONTWRITEBYTECODE="1", **{RESULT_ENV: result_path}),
        )
        result = _read_result(result_path)
        if result is None:
            result = {"passed": False, "details": _no_result(done)}
    except subprocess.TimeoutExpired:
        result = {"passed": False, "details": "timed out after %ss" % suite.timeout_s}
    except ValueError as exc:
        result = {"passed": False, "details": "unreadable result: %s" % exc}
    wall_s = time.monotonic() - started
    result.setdefault("suite", suite.name)
    result.setdefault("duration_s", round(wall_s, 3))
    return result, wall_s


def _read_result(path):
    """The suite's result (a dict) from its file, None when it wrote none. Raises
    ValueError for a file that holds no JSON object."""
    try:
        with open(path, encoding="utf-8") as fh:
            result = json.loads(fh.read())
    except FileNotFoundError:
        return None
    if not isinstance(result, dict):
        raise ValueError("not a JSON object")
    return result


def _no_result(done):
    """Why a suite that wrote no result failed: its exit, the tails of stdout and stderr."""
    return "no result (exit %s); stdout: %s; stderr: %s" % (
        done.returncode,
        quote_tail(done.stdout, STDOUT_TAIL_CHARS),
        quote_tail(done.stderr, STDERR_TAIL_CHARS),
    )


def quote_tail(text, limit):
    """The last `limit` characters of host output as quotable text: control characters
    (but newline and tab) escaped as \\xNN / \\uNNNN, "(empty)" for none."""
    tail = (text or "").strip()[-limit:]
    if not tail:
        return "(empty)"
    return "".join(
        c if c.isprintable() or c in "\n\t" else ("\\x%02x" % ord(c) if ord(c) < 256
                                                  else "\\u%04x" % ord(c))
        for c in tail
    )  # fmt: skip


def _why_failed(result):
    """Return `suite: first failed check: first line of its detail` (what a summary shows)."""
    checks = [c for c in result.get("checks") or [] if not c.get("passed")]
    if not checks:
        return "%s: %s" % (result.get("suite"), str(result.get("details") or "failed")[:400])
    lines = str(checks[0].get("detail") or "").strip().splitlines() or [""]
    return "%s: %s: %s" % (result.get("suite"), checks[0].get("name"), lines[0][:200])
