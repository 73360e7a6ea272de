"""The agent's entry point: one request per stdin line, one framed JSON answer per request.

For each request the agent runs its ops in order and stops at the first failed (or
halted) op; every error comes back as data. One agent process serves every request of a
command, so a request costs one round trip. SIGHUP is ignored, so an install completes even
when the SSH channel drops mid-call; a flock on the state dir keeps an orphaned agent's
install from racing the controller's rollback.
"""

import functools
import json
import os
import signal
import sys
import time

from . import ops_files, ops_gate, ops_plan, ops_service
from .state import Ctx
from .wire import (
    BEGIN,
    BUNDLE_PACKAGE,
    END,
    Code,
    OpFailed,
    OpHalt,
    WireError,
    bundle_hash,
    bundle_sources,
    parse_args,
)

# op name -> function(ctx, typed args) returning a Record or a JSON-able dict
OPS = {
    "facts": ops_plan.op_facts,
    "check_plan": ops_plan.op_check_plan,
    "lock_acquire": ops_plan.op_lock_acquire,
    "lock_release": ops_plan.op_lock_release,
    "journal": ops_plan.op_journal,
    "backup": ops_files.op_backup,
    "install": ops_files.op_install,
    "compile": ops_files.op_compile,
    "restore": ops_files.op_restore,
    "prune": ops_files.op_prune,
    "restart": ops_service.op_restart,
    "health": ops_service.op_health,
    "smoke": ops_service.op_smoke,
    "gate_measure": ops_gate.op_gate_measure,
}

# A request of only these ops (a preflight) waits a short while for the state dir's flock
# and then runs anyway: facts and check_plan only read, and lock_acquire creates the lock
# file atomically (O_EXCL). What is not atomic, replacing an expired or broken lock, it does
# only while holding the flock (Ctx.flock_held), so two preflights after a dead run cannot
# both take the lock over. Every other request waits as long as a run may.
_QUICK = {"facts", "check_plan", "lock_acquire"}
# A request of only these ops needs no flock at all: facts only reads, and gate_measure only
# reads the server (it writes save_as atomically; a push that gates holds the host lock).
_NO_FLOCK = {"facts", "gate_measure"}
QUICK_WAIT_S, EXCLUSIVE_WAIT_S = 1.0, 3600.0
FLOCK_POLL_S = 0.05
TRACEBACK_CHARS = 3000


@functools.lru_cache(maxsize=None)
def agent_version():
    """Return this agent's version: the hash of the bundle it was built from.

    On the host that is the dict the bootstrap received (`ddtree_agent.SOURCES`);
    imported from the controller's source tree, it is the modules next to this file.
    """
    package = sys.modules.get(__package__)
    sources = getattr(package, "SOURCES", None)
    if sources is None or __package__ != BUNDLE_PACKAGE:
        sources = bundle_sources(os.path.dirname(os.path.abspath(__file__)))
    return bundle_hash(sources)


def _hold_agent_lock(request):
    """Serialise the requests that change a host: flock on the state dir itself.

    An agent whose SSH channel dropped keeps running (SIGHUP is ignored); the controller's
    rollback over a fresh connection must not overtake it, or the orphan's install could land
    after the restore. The lock is taken on the directory, so a refused preflight writes
    nothing. Returns (fd or None, note): note is "held", "read-only" (only _NO_FLOCK ops),
    "unavailable: ..." (no state dir yet for a quick request) or "busy" (gave up waiting).
    """
    import fcntl

    names = {op.get("op") for op in request["ops"]}
    if names <= _NO_FLOCK:
        return None, "read-only"
    quick = names <= _QUICK
    try:
        if not quick:
            os.makedirs(request["state_dir"], mode=0o700, exist_ok=True)
        fd = os.open(request["state_dir"], os.O_RDONLY | os.O_DIRECTORY)
    except OSError as exc:
        return None, "unavailable: %s" % exc
    deadline = time.monotonic() + (QUICK_WAIT_S if quick else EXCLUSIVE_WAIT_S)
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return fd, "held"
        except BlockingIOError:
            if time.monotonic() >= deadline:
                os.close(fd)
                return None, "busy"
            time.sleep(FLOCK_POLL_S)


def handle(request):
    """Return the answer to one request (a dict): {"ok", "results": [...]} or, when it
    cannot run at all, {"ok": False, "results": [], "error": why}.

    A request from a controller with another agent bundle is refused ("agent version
    mismatch"); so is a changing request while another agent holds the state dir.
    """
    if request.get("agent_version") != agent_version():
        return {"ok": False, "results": [], "error": "agent version mismatch"}
    fd, note = _hold_agent_lock(request)
    quick = {op.get("op") for op in request["ops"]} <= _QUICK
    if note == "busy" and not quick:
        return {"ok": False, "results": [], "error": "another agent is still working here"}
    try:
        return run_ops(request, flock_held=fd is not None)
    finally:
        if fd is not None:
            os.close(fd)


def run_ops(request, flock_held=True):
    """Run the request's ops in order, stopping after the first failed or halted one;
    return {"ok": all ok, "results": [one entry per op run]}.

    flock_held: whether this process holds the state dir's flock (see _QUICK). Never raises
    for an op: OpFailed, WireError and any other exception come back as the op's entry.
    """
    ctx, results = Ctx(request, flock_held), []
    for op in request["ops"]:
        started = time.monotonic()
        name = op.get("op")
        entry = {"op": name, "ok": True, "data": None, "error": None, "code": None}
        output = None
        try:
            output = OPS[name](ctx, parse_args(name, op.get("args", {})))
            entry["data"] = _plain(output)
        except OpHalt as exc:
            entry.update(halt=True, note=str(exc), code=exc.code.value, data=exc.data)
        except OpFailed as exc:
            entry.update(ok=False, error=str(exc), code=exc.code.value, data=exc.data)
        except WireError as exc:
            entry.update(ok=False, error=str(exc), code=Code.BAD_ARGS.value, data={})
        except Exception as exc:  # noqa: BLE001 - anything else still comes back as data
            import traceback

            entry.update(
                ok=False,
                error="%s: %s" % (type(exc).__name__, exc),
                code=Code.EXCEPTION.value,
                data={"traceback": traceback.format_exc()[-TRACEBACK_CHARS:]},
            )
        entry["duration_s"] = round(time.monotonic() - started, 4)
        ctx.outputs[name] = output
        results.append(entry)
        if not entry["ok"] or entry.get("halt"):
            break
    return {"ok": all(r["ok"] for r in results), "results": results}


def _plain(output):
    """Return an op's output as JSON-ready data (a Record becomes its dict)."""
    to_dict = getattr(output, "to_dict", None)
    return to_dict() if to_dict is not None else output


def main():
    """Answer one request per stdin line until EOF: one agent process serves a whole push."""
    signal.signal(signal.SIGHUP, signal.SIG_IGN)  # finish the work if the channel drops
    for line in sys.stdin:
        if not line.strip():
            continue
        answer = json.dumps(handle(json.loads(line)))
        try:
            sys.stdout.write("%s\n%s\n%s\n" % (BEGIN, answer, END))
            sys.stdout.flush()
        except (BrokenPipeError, OSError):
            return  # the controller is gone; the work above is done and journaled
