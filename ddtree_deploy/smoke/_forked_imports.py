"""The `imports` suite's warm parent: import what the patched modules share ONCE, then fork
one child per group of modules, so each group's import is still isolated but none pays for
torch, transformers and the unpatched parts of sglang again.

Run by imports.py as `python _forked_imports.py` with one JSON object on stdin:
    {"blocked": [names], "warm": [names], "groups": [[names], ...],
     "timeout_s": seconds per module, "workers": children at once, "out": path,
     "path": the sys.path to import with}
It writes JSON lines to the file `out` (on stdout without one; a file, because whatever a
host's python prints on stdout could glue onto a line): first {"warm": {...}} (what the
warm-up did, or why fork is unsafe here: then it stops and imports.py imports every group
in fresh processes), then one {"group": i, "results": {name: None | {error, frames, tail}},
"s": seconds} per group.

Why the result equals a fresh process's:
- While warming, a meta path finder refuses every blocked name (the patched modules and
  their dependents) and everything under it. A warm module that tried to import one is
  evicted again with every module of the patched packages it brought in from that
  refusal on (and refused from then on, as is its import chain), so each child
  imports its module FIRST among those that involve the patch, as a fresh process would
  (circular imports a patch adds still fail the same way).
- A warm import that raises, hangs (an alarm ends it) or leaves CUDA initialised changes
  nothing a child depends on: the first is skipped, the last two make fork unsafe and the
  suite falls back to fresh processes, saying so.
- Children run in their own process: a crash (signal), a hang (SIGKILL after timeout_s) or
  an exception is one module's failure; the rest of its group goes on in a new child.
Stdlib only: this runs on the host's python.
"""

import importlib
import json
import os
import select
import signal
import sys
import threading
import time
import traceback


class Blocker:
    """Meta path finder refusing `names`, their submodules and every module found to import
    one of them (tainted).

    At the first refusal during one warm import it notes the import chain (the modules still
    initialising: they import a refused one) and the modules that finished before (clean:
    they ran to the end without touching the patch); the chain is refused from then on, so
    no later warm import pays for it again.
    """

    def __init__(self, names):
        self.names = set(names)
        self.clean = None  # None: no refusal in this warm import yet

    def refuses(self, name):
        return name in self.names or any(name.startswith(n + ".") for n in self.names)

    def find_spec(self, name, path=None, target=None):
        if not self.refuses(name):
            return None
        if self.clean is None:
            chain = {n for n, m in list(sys.modules.items()) if _initializing(m)}
            self.names |= chain
            self.clean = set(sys.modules) - chain
        raise ImportError("%s is imported in its own child, not in the warm parent" % name)


def _initializing(module):
    """True while the module's body runs (importlib marks its spec so)."""
    return bool(getattr(getattr(module, "__spec__", None), "_initializing", False))


class WarmupTimeout(BaseException):
    """Raised by the alarm when the warm-up runs past its time (BaseException: an import's
    own `except Exception` must not swallow it)."""


def _alarm(signum, frame):
    raise WarmupTimeout()


def warm_up(names, blocked, timeout_s):
    """Import `names` with `blocked` refused; return what happened (a dict for the report).

    Modules of the patched packages that a warm import brought in from its first refusal on
    are removed from sys.modules again (those that finished before it stay: they never
    touched the patch); third-party modules (torch…) stay: they cannot import the patched
    package, and torch cannot be imported twice in one process.
    """
    tops = {name.split(".")[0] for name in blocked}
    blocker = Blocker(blocked)
    sys.meta_path.insert(0, blocker)
    started = time.monotonic()
    kept, evicted, failed = [], [], 0
    previous = signal.signal(signal.SIGALRM, _alarm)
    signal.setitimer(signal.ITIMER_REAL, timeout_s)
    timed_out = None
    # third-party packages first: they never involve the patch, and sglang's modules import them
    order = sorted(names, key=lambda n: (n.split(".")[0] in tops, n))
    try:
        for name in order:
            if blocker.refuses(name):
                evicted.append(name)
                continue
            blocker.clean = None
            try:
                importlib.import_module(name)
            except WarmupTimeout:
                timed_out = name
                break
            except BaseException:  # noqa: BLE001 - any failure just means: not warmed
                failed += 1
            if blocker.clean is not None:  # touched the patch: keep only what finished before
                for mod in set(sys.modules) - blocker.clean:
                    if mod.split(".")[0] in tops:
                        sys.modules.pop(mod, None)
                evicted.append(name)
            elif name in sys.modules:
                kept.append(name)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
        sys.meta_path.remove(blocker)
    for name in list(sys.modules):  # partial leftovers of an interrupted or evicted import
        if blocker.refuses(name) or _initializing(sys.modules[name]):
            sys.modules.pop(name, None)
    report: dict = {
        "s": round(time.monotonic() - started, 3),
        "kept": len(kept),
        "evicted": len(evicted),
        "failed": failed,
        "modules": len(sys.modules),
    }
    if timed_out is not None:
        report["unsafe"] = "warming %s took over %ss" % (timed_out, timeout_s)
    torch = sys.modules.get("torch")
    cuda = getattr(torch, "cuda", None)
    if cuda is not None and getattr(cuda, "is_initialized", lambda: False)():
        report["unsafe"] = "CUDA was initialised while importing shared modules"
    return report


def import_one(name):
    """None when `name` imports, else {error, frames, tail}."""
    try:
        importlib.import_module(name)
        return None
    except BaseException as exc:  # noqa: BLE001 - report every failure, SystemExit included
        frames = [f.filename for f in traceback.extract_tb(exc.__traceback__)]
        return {
            "error": "%s: %s" % (type(exc).__name__, exc),
            "frames": frames,
            "tail": traceback.format_exc()[-1500:],
        }


def child_main(names, fd):
    """In the forked child: import each name, writing {start} and {done} lines to fd."""
    os.dup2(2, 1)  # a module printing must not reach the parent's protocol on stdout
    threading.Thread(target=_exit_with_parent, args=(os.getppid(),), daemon=True).start()
    out = os.fdopen(fd, "w", buffering=1)
    for name in names:
        out.write(json.dumps({"start": name}) + "\n")
        out.write(json.dumps({"done": name, "failure": import_one(name)}) + "\n")
    out.flush()
    os._exit(0)


def _exit_with_parent(parent):
    """A child whose warm parent was killed (the suite's own timeout) must not hang on."""
    while os.getppid() == parent:
        time.sleep(1.0)
    os._exit(71)


class Child:
    """One forked child importing `names` (the rest of a group), and what it said so far."""

    def __init__(self, group, names, timeout_s):
        self.group = group
        self.names = list(names)
        self.timeout_s = timeout_s
        self.results = {}
        self.buffer = b""
        read_fd, write_fd = os.pipe()
        pid = os.fork()
        if pid == 0:  # pragma: no cover - the child never returns
            os.close(read_fd)
            try:
                child_main(self.names, write_fd)
            finally:
                os._exit(70)
        os.close(write_fd)
        self.pid, self.fd = pid, read_fd
        self.current = self.names[0]  # until it says otherwise: a hang at start is this one
        self.deadline = time.monotonic() + timeout_s

    def feed(self, data):
        self.buffer += data
        *lines, self.buffer = self.buffer.split(b"\n")
        for line in lines:
            msg = json.loads(line)
            if "start" in msg:
                self.current = msg["start"]
                self.deadline = time.monotonic() + self.timeout_s
            else:
                self.results[msg["done"]] = msg["failure"]
                self.current = None

    def end(self, why, kind="crash"):
        """The child is gone (`why`: None when it exited after its last name): blame the
        module it was importing; return the names still to import in a new child."""
        os.close(self.fd)
        if self.current is not None:
            self.results[self.current] = {"error": why, "frames": [], "tail": why, "kind": kind}
        return [n for n in self.names if n not in self.results]


def _exit_reason(status):
    if os.WIFSIGNALED(status):
        return "interpreter died (signal %d)" % os.WTERMSIG(status)
    return "interpreter died (exit %d)" % os.WEXITSTATUS(status)


def run_groups(groups, timeout_s, workers):
    """Yield (group index, results, seconds since its first child started) as each group
    finishes; at most `workers` children at once."""
    pending = [(i, list(names)) for i, names in enumerate(groups) if names]
    began: dict = {}
    running: dict = {}
    results: dict = {i: {} for i, _ in pending}
    remaining = {i: len(names) for i, names in pending}
    while pending or running:
        while pending and len(running) < workers:
            index, names = pending.pop(0)
            began.setdefault(index, time.monotonic())
            child = Child(index, names, timeout_s)
            running[child.fd] = child
        now = time.monotonic()
        wait = max(0.0, min(c.deadline for c in running.values()) - now)
        ready, _, _ = select.select(list(running), [], [], wait)
        for fd in ready:
            child = running[fd]
            data = os.read(fd, 65536)
            if data:
                child.feed(data)
                continue
            _, status = os.waitpid(child.pid, 0)
            rest = child.end(_exit_reason(status) if child.current else None)
            del running[fd]
            _collect(child, rest, results, remaining, pending)
        now = time.monotonic()
        for fd, child in list(running.items()):
            if fd in running and now >= child.deadline:
                os.kill(child.pid, signal.SIGKILL)
                os.waitpid(child.pid, 0)
                why = "import of %s did not finish in %ss: killed" % (child.current, timeout_s)
                rest = child.end(why, "hang")
                del running[fd]
                _collect(child, rest, results, remaining, pending)
        for index in [i for i, left in remaining.items() if left == 0]:
            del remaining[index]
            yield index, results.pop(index), round(time.monotonic() - began[index], 3)


def _collect(child, rest, results, remaining, pending):
    """Move a finished child's results to its group; queue the rest of the group."""
    results[child.group].update(child.results)
    remaining[child.group] -= len(child.results)
    if rest:
        pending.insert(0, (child.group, rest))


def main():
    # The script's own folder (the smoke suites and their helpers) must not shadow anything.
    here = os.path.dirname(os.path.abspath(__file__))
    if sys.path and os.path.abspath(sys.path[0] or ".") == here:
        del sys.path[0]
    request = json.loads(sys.stdin.read())
    if request.get("path"):  # the suite's sys.path (an isolated python starts with less)
        sys.path[:] = request["path"]
    out = open(request["out"], "a", encoding="utf-8") if request.get("out") else sys.stdout

    def emit(message):
        out.write(json.dumps(message) + "\n")
        out.flush()

    timeout_s = float(request.get("timeout_s") or 300)
    warm = warm_up(request.get("warm", []), request.get("blocked", []), timeout_s)
    emit({"warm": warm})
    if "unsafe" in warm:
        return
    workers = max(1, int(request.get("workers") or 1))
    for index, results, seconds in run_groups(request.get("groups", []), timeout_s, workers):
        emit({"group": index, "results": results, "s": seconds})


if __name__ == "__main__":
    main()
    sys.stdout.flush()
    # Skip the interpreter's teardown: with torch and sglang loaded it takes seconds, and
    # everything this process had to say is on stdout already.
    os._exit(0)
