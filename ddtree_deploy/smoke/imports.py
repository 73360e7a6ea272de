"""Smoke suite `imports`: the patched modules and their dependents import on this host.

1. Each module the patchset adds or changes is imported in a process of its own, so one
   module's import cannot mask another's failure; every module under the patched modules'
   package that imports one of them (found by reading its source with ast) is imported in
   ONE further process.
2. Those processes are children forked from ONE warm parent (_forked_imports.py) that has
   already imported what the modules share (torch, transformers, the unpatched parts of
   sglang) with every patched module and dependent refused, so the suite costs about one
   import of everything instead of one per module. A child that crashes, raises or hangs
   (killed after `import_timeout_s`) is that module's failure; its group goes on without
   it. `--isolated-imports` (inventory [hosts.NAME.smoke] isolated_imports) imports each in
   a fresh interpreter instead; the suite also falls back to that, and says why, when the
   warm parent finds fork unsafe (CUDA initialised, a hanging shared import) or dies.
3. A dependent fails the suite when its import error involves a patched module (a
   missing name, or a traceback frame inside a patched file); other errors (e.g. a CUDA
   kernel package absent on this host) are reported as unavailable, not as failures.
The `mode` check says which way the modules were imported and what the warm-up did.
"""

import ast
import json
import os
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor

from _suite import Suite

_PROBE = r"""
import importlib, json, os, sys, traceback
if len(sys.argv) > 3:
    sys.path[:] = json.loads(sys.argv[3])  # the suite's own: an isolated python has no more
out = {}
for name in json.loads(sys.argv[1]):
    try:
        importlib.import_module(name)
        out[name] = None
    except BaseException as exc:
        frames = [f.filename for f in traceback.extract_tb(exc.__traceback__)]
        out[name] = {"error": f"{type(exc).__name__}: {exc}", "frames": frames,
                     "tail": traceback.format_exc()[-1500:]}
with open(sys.argv[2], "w") as fh:  # out of band: a .pth may print on stdout
    fh.write(json.dumps(out))
os._exit(0)  # no teardown of torch and sglang: seconds, and the answer is out
"""


def python_flags():
    """This interpreter's -I and -B, for the interpreters the suite starts: run isolated
    by the agent (ops_smoke.py), they are isolated too and write no .pyc. And its bytecode
    prefix (-X pycache_prefix, which the agent passes on from PYTHONPYCACHEPREFIX): they
    read bytecode where this one does."""
    flags = ["-I"] * bool(sys.flags.isolated) + ["-B"] * bool(sys.flags.dont_write_bytecode)
    prefix = getattr(sys, "pycache_prefix", None)
    return flags + (["-X", "pycache_prefix=" + prefix] if prefix else [])


def child_path():
    """The sys.path the suite's interpreters import with: this one's (an isolated python
    starts without PYTHONPATH's entries, which the agent gave the suite), less the suite's
    own folder, so no suite or helper shadows a module."""
    here = os.path.dirname(os.path.abspath(__file__))
    return [p for p in sys.path if p and os.path.abspath(p) != here]


def read_json_file(path):
    """The JSON in `path`, None when it is missing or unreadable."""
    try:
        with open(path, encoding="utf-8") as fh:
            return json.loads(fh.read())
    except (OSError, ValueError):
        return None


def import_in_fresh_process(names, timeout_s):
    """name -> None or {error, frames, tail}, from one new interpreter (killed after
    timeout_s per name)."""
    limit = timeout_s * max(1, len(names))
    with tempfile.TemporaryDirectory(prefix="ddtree-imports-") as scratch:
        out = os.path.join(scratch, "result.json")
        try:
            done = subprocess.run(
                [
                    sys.executable,
                    *python_flags(),
                    "-c",
                    _PROBE,
                    json.dumps(names),
                    out,
                    json.dumps(child_path()),
                ],  # fmt: skip
                capture_output=True,
                text=True,
                errors="replace",
                timeout=limit,
            )
        except subprocess.TimeoutExpired:
            why = "import did not finish in %ss: killed" % limit
            hang = {"error": why, "frames": [], "tail": why, "kind": "hang"}
            return {name: hang for name in names}
        found = read_json_file(out)
    if not isinstance(found, dict):
        code = done.returncode
        why = "interpreter died (%s)" % (f"signal {-code}" if code < 0 else f"exit {code}")
        err = {"error": why, "frames": [], "tail": f"{why}\n{done.stderr[-1500:]}", "kind": "crash"}
        return {name: err for name in names}
    return found


def import_isolated(groups, timeout_s):
    """Each group in fresh interpreters: one per group, side by side up to the CPU count."""
    workers = max(1, min(len(groups), os.cpu_count() or 1))
    with ThreadPoolExecutor(workers) as pool:
        done = pool.map(lambda names: import_in_fresh_process(names, timeout_s), groups)
    return [results for results in done]


def module_file(site, name):
    """The source file of module `name` under `site`, or None."""
    base = os.path.join(site, *name.split("."))
    for path in (base + ".py", os.path.join(base, "__init__.py")):
        if os.path.isfile(path):
            return path
    return None


def shared_imports(site, names, blocked):
    """What the modules `names` import (read with ast), less the blocked ones: the warm
    parent's list. Relative imports are resolved against each module's package."""
    found = set()
    for name in names:
        path = module_file(site, name)
        if path is None:
            continue
        package = name if path.endswith("__init__.py") else name.rpartition(".")[0]
        try:
            found |= imported_modules(path, package)
        except (SyntaxError, OSError, UnicodeDecodeError, ValueError):
            continue
    blocked = set(blocked)
    return sorted(
        n
        for n in found
        if n and n not in blocked and not any(n.startswith(b + ".") for b in blocked)
    )


def import_forked(site, groups, timeout_s):
    """Each group in a child forked from one warm parent; returns (results per group, what
    the warm-up did, why some groups ran in fresh interpreters instead or "")."""
    names = [n for group in groups for n in group]
    request = {
        "blocked": names,
        "warm": shared_imports(site, names, names),
        "groups": groups,
        "timeout_s": timeout_s,
        "workers": os.cpu_count() or 1,
    }
    script = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_forked_imports.py")
    limit = timeout_s * (len(names) + 1)
    with tempfile.TemporaryDirectory(prefix="ddtree-imports-") as scratch:
        request["out"] = os.path.join(scratch, "lines.jsonl")  # out of band, as the probe's
        request["path"] = child_path()
        code: int | str  # the exit status, or how it was killed
        try:
            done = subprocess.run(
                [sys.executable, *python_flags(), script],
                input=json.dumps(request),
                capture_output=True,
                text=True,
                errors="replace",
                timeout=limit,
            )
            stderr, code = done.stderr, done.returncode
        except subprocess.TimeoutExpired as exc:
            raw = exc.stderr or ""
            stderr = raw.decode(errors="replace") if isinstance(raw, bytes) else raw
            code = "killed after %ss" % limit
        try:
            with open(request["out"], encoding="utf-8", errors="replace") as fh:
                lines = fh.read().splitlines()
        except OSError:
            lines = []
    warm, results = {}, [None] * len(groups)
    for line in lines:
        try:
            msg = json.loads(line)
        except ValueError:  # a line cut short when the parent was killed
            continue
        if "warm" in msg:
            warm = msg["warm"]
        elif "group" in msg:
            results[msg["group"]] = msg["results"]
            warm.setdefault("groups_s", {})[msg["group"]] = msg.get("s")
    missing = [i for i, r in enumerate(results) if r is None]
    fallback = ""
    if missing:
        if warm.get("unsafe"):
            fallback = "fork unsafe here: %s" % warm["unsafe"]
        else:
            last = (stderr.strip().splitlines() or [""])[-1][:200]
            fallback = "warm parent ended early (exit %s): %s" % (code, last)
        again = import_isolated([groups[i] for i in missing], timeout_s)
        for index, found in zip(missing, again):
            results[index] = found
    return results, warm, fallback


def describe_mode(isolated, warm, fallback, groups):
    """The `mode` check's detail: how the modules were imported."""
    count = "%d modules in %d processes" % (sum(len(g) for g in groups), len(groups))
    if isolated:
        return "isolated (--isolated-imports): %s, each a fresh interpreter" % count
    text = (
        "fork: %s forked from one warm parent (warm-up %ss: %s shared imports kept, %s "
        % (
            count,
            warm.get("s", "?"),
            warm.get("kept", "?"),
            warm.get("evicted", "?"),
        )
        + "evicted for touching the patch)"
    )
    timed = sorted((s, i) for i, s in (warm.get("groups_s") or {}).items() if s is not None)
    if timed:
        seconds, index = timed[-1]
        group = groups[index]
        name = group[0] if len(group) == 1 else "the %d dependents" % len(group)
        text += "; slowest child: %s, %ss" % (name, seconds)
    if fallback:
        text += "; fell back to fresh interpreters: " + fallback
    return text


def imported_modules(path, package):
    """Absolute module names a source file imports (relative imports resolved)."""
    with open(path, encoding="utf-8") as fh:
        tree = ast.parse(fh.read(), path)
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(parts + ([base] if base else []))
            found.add(base)
            found.update(f"{base}.{alias.name}" for alias in node.names)
    return found


def find_dependents(site, patched):
    """Modules beside each patched module (same package dir) that import a patched one."""
    dependents = set()
    for module in patched:
        package = module.rsplit(".", 1)[0]
        directory = os.path.join(site, *package.split("."))
        if not os.path.isdir(directory):
            continue
        for entry in sorted(os.listdir(directory)):
            name = f"{package}.{entry[:-3]}"
            if not entry.endswith(".py") or name in patched or entry == "__init__.py":
                continue
            try:
                if imported_modules(os.path.join(directory, entry), package) & set(patched):
                    dependents.add(name)
            except (SyntaxError, OSError, UnicodeDecodeError):
                dependents.add(name)  # unreadable: let the import tell
    return sorted(dependents)


def implicates_patch(failure, patched, patched_files):
    """True when a dependent's failure may be the patch's doing: its error names a patched
    module or a frame is in a patched file; a hang or a crash cannot be told apart."""
    if failure.get("kind") in ("hang", "crash"):
        return True
    text = failure["error"]
    return any(m in text for m in patched) or any(f in patched_files for f in failure["frames"])


def main():
    suite = Suite("imports")
    site = suite.input.get("site_packages") or ""
    patched = suite.input.get("modules", [])
    patched_files = {os.path.join(site, f["path"]) for f in suite.input.get("files", [])}
    options = (suite.input.get("options") or {}).get("imports") or {}
    timeout_s = float(options.get("timeout_s") or 300)
    isolated = bool(options.get("isolated")) or not hasattr(os, "fork")
    dependents = find_dependents(site, patched)
    groups = [[name] for name in patched] + ([dependents] if dependents else [])
    if not groups:
        suite.finish()
    if isolated:
        results, warm, fallback = import_isolated(groups, timeout_s), {}, ""
    else:
        results, warm, fallback = import_forked(site, groups, timeout_s)
    suite.check("mode", True, describe_mode(isolated, warm, fallback, groups))
    for name in patched:
        failure = results[patched.index(name)][name]
        suite.check(name, failure is None, "ok" if failure is None else failure["tail"])
    unavailable = {}
    for name, failure in (results[-1] if dependents else {}).items():
        if failure is None:
            suite.check(name, True, "ok (dependent)")
        elif implicates_patch(failure, patched, patched_files):
            suite.check(name, False, f"dependent of a patched module: {failure['tail']}")
        else:
            unavailable[name] = failure["error"][:200]
    if unavailable:
        suite.check(
            "unavailable on this host (not caused by the patch)", True, json.dumps(unavailable)
        )
    suite.finish()


if __name__ == "__main__":
    main()
