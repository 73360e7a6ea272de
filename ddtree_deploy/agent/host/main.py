"""The agent's entry point: one request per stdin line, one framed JSON answer per request.

For each request the agent runs its ops in order and stops at the first failed (or
halted) op; every error comes back as data. One agent process serves every request of a
command, so a request costs one round trip. SIGHUP is ignored, so an install completes even
when the SSH channel drops mid-call; a flock on the state dir keeps an orphaned agent's
install from racing the controller's rollback. On a container host this process runs on the
host and relays each request into the container's agent (relay.py).
"""

import functools
import importlib
import json
import os
import signal
import sys
import threading
import time

from .entries import run_entry
from .private import check_private_fd, check_state_dir
from .state import Ctx
from .wire import BEGIN, END, OpFailed, OpName, parse_args
from .wire_bundle import BUNDLE_PACKAGE, bundle_hash, bundle_sources


def _op(module, name):
    """Return op function `name` of sibling `module`, imported on the op's first call: a
    preflight compiles and imports only ops_plan, not the whole bundle (the agent starts
    from source on every command)."""

    def op(ctx, args):
        return getattr(importlib.import_module("." + module, __package__), name)(ctx, args)

    op.__name__ = name
    return op


# OpName -> function(ctx, typed args) returning a Record or a JSON-able dict
OPS = {
    OpName.FACTS: _op("ops_plan", "op_facts"),
    OpName.CHECK_PLAN: _op("ops_plan", "op_check_plan"),
    OpName.LOCK_ACQUIRE: _op("ops_plan", "op_lock_acquire"),
    OpName.LOCK_RELEASE: _op("ops_plan", "op_lock_release"),
    OpName.JOURNAL: _op("ops_plan", "op_journal"),
    OpName.BACKUP: _op("ops_files", "op_backup"),
    OpName.INSTALL: _op("ops_files", "op_install"),
    OpName.COMPILE: _op("ops_compile", "op_compile"),
    OpName.RESTORE: _op("ops_files", "op_restore"),
    OpName.DRIFT: _op("drift", "op_drift"),
    OpName.PRUNE: _op("ops_files", "op_prune"),
    OpName.RESTART: _op("ops_service", "op_restart"),
    OpName.HEALTH: _op("ops_service", "op_health"),
    OpName.SERVICES: _op("ops_service_state", "op_services"),
    OpName.SMOKE: _op("ops_smoke", "op_smoke"),
    OpName.GATE_MEASURE: _op("ops_gate", "op_gate_measure"),
    OpName.EDITS: _op("ops_capture", "op_edits"),
    OpName.HISTORY: _op("ops_history", "op_history"),
}
# What a push's later requests import, loaded while the agent waits for them (see main).
WARM_MODULES = (".ops_files", ".ops_compile", ".ops_service", ".ops_smoke")

# A request of only these ops (a preflight) waits a short while for the state dir's flock
# and then runs anyway: facts and check_plan only read, and lock_acquire creates the lock
# file atomically (O_EXCL). What is not atomic, replacing an expired or broken lock, it does
# only while holding the flock (Ctx.flock_held), so two preflights after a dead run cannot
# both take the lock over. Every other request waits as long as a run may.
_QUICK = {OpName.FACTS, OpName.CHECK_PLAN, OpName.LOCK_ACQUIRE}
# A request of only these ops needs no flock at all: facts, services, drift, edits and
# history only read (each journal file is replaced whole), and gate_measure only reads the
# server (it writes save_as atomically; a push that gates holds the host lock).
_NO_FLOCK = {
    OpName.FACTS,
    OpName.SERVICES,
    OpName.DRIFT,
    OpName.GATE_MEASURE,
    OpName.EDITS,
    OpName.HISTORY,
}
# Ops that never read or write the state dir: a request of only these skips its checks.
_NO_STATE = {OpName.SERVICES, OpName.RESTART, OpName.HEALTH, OpName.EDITS}
QUICK_WAIT_S, EXCLUSIVE_WAIT_S = 1.0, 3600.0
FLOCK_POLL_S = 0.05


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
        fd = os.open(request["state_dir"], os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
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


def handle(request, relay=None):
    """Return the answer to one request (a dict): {"ok", "results": [...]} or, when it
    cannot run at all, {"ok": False, "results": [], "error": why} (+ "code").

    A request from a controller with another agent bundle is refused ("agent version
    mismatch"); so is a changing request while another agent holds the state dir. A request
    naming a container is relayed (relay.Relay: this process runs on the container's host
    and touches no state dir of its own); `relay` keeps the container's agent between
    requests (a new one is made when None).
    """
    if request.get("agent_version") != agent_version():
        return {"ok": False, "results": [], "error": "agent version mismatch"}
    if request.get("container"):
        if relay is not None:
            return relay.handle(request)
        from .relay import Relay

        own = Relay()
        try:
            return own.handle(request)
        finally:
            own.close()
    names = {op.get("op") for op in request["ops"]}
    fd = None
    try:
        if names - _NO_STATE:  # private.py: a state dir others can write is refused
            check_state_dir(request["state_dir"])
        fd, note = _hold_agent_lock(request)
        if fd is not None:  # the dir locked (perhaps just made) is the one checked
            check_private_fd(fd, request["state_dir"])
    except OpFailed as exc:
        if fd is not None:
            os.close(fd)
        return _refused(request, exc)
    quick = names <= _QUICK
    if note == "busy" and not quick:
        return {"ok": False, "results": [], "error": "another agent is still working here"}
    try:
        return run_ops(request, flock_held=fd is not None)
    finally:
        if fd is not None:
            os.close(fd)


def _refused(request, exc):
    """The answer to a request refused before any op ran: its first op failed with `exc`."""

    def refuse():
        raise exc

    first = (request["ops"] or [{}])[0].get("op")
    entry, _output = run_entry(first, refuse)
    return {"ok": False, "results": [entry]}


def run_ops(request, flock_held=True):
    """Run the request's ops in order, stopping after the first failed or halted one;
    return {"ok": all ok, "results": [one entry per op run]}.

    flock_held: whether this process holds the state dir's flock (see _QUICK). Never raises
    for an op: OpFailed, WireError and any other exception come back as the op's entry.
    """
    ctx, results = Ctx(request, flock_held), []
    for op in request["ops"]:
        name = op.get("op")
        entry, output = run_entry(name, functools.partial(_run_op, ctx, op))
        ctx.outputs[name] = output
        results.append(entry)
        if not entry["ok"] or entry.get("halt"):
            break
    return {"ok": all(r["ok"] for r in results), "results": results}


def _run_op(ctx, op):
    """Run one op of a request in `ctx`; return its output (raises as the op does)."""
    name = op.get("op")
    return OPS[name](ctx, parse_args(name, op.get("args", {})))


def warm_up():
    """Import WARM_MODULES, quietly (an op that needs a broken one reports it itself)."""
    for name in WARM_MODULES:
        try:
            importlib.import_module(name, __package__)
        except Exception:  # best effort: the op that needs it reports its own import error
            pass


def main():
    """Answer one request per stdin line until EOF: one agent process serves a whole push
    (on a container host, with one container agent kept behind the relay).

    After its first answer the agent imports what a push's later requests need (warm_up,
    a daemon thread) while it waits for the next line: that wait is at least a round trip.
    """
    signal.signal(signal.SIGHUP, signal.SIG_IGN)  # finish the work if the channel drops
    relay, warming = None, None
    try:
        for line in sys.stdin:
            if not line.strip():
                continue
            request = json.loads(line)
            if request.get("container") and relay is None:
                from .relay import Relay

                relay = Relay()
            answer = json.dumps(handle(request, relay))
            try:
                # BEGIN starts a line even after text a .pth printed without a newline
                sys.stdout.write("\n%s\n%s\n%s\n" % (BEGIN, answer, END))
                sys.stdout.flush()
            except (BrokenPipeError, OSError):
                return  # the controller is gone; the work above is done and journaled
            if warming is None:
                warming = threading.Thread(target=warm_up, name="warm-up", daemon=True)
                warming.start()
    finally:
        if relay is not None:
            relay.close()
