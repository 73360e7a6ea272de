"""Smoke suite `imports`: the patched modules and their dependents import on this host.

1. Each module the patchset adds or changes is imported in a fresh process of its own
   (run side by side), so one module's import cannot mask another's failure.
2. Every module under the patched modules' package that imports one of them (found by
   reading its source with ast) is imported in ONE further fresh process: importing
   sglang costs seconds, and a process per dependent would cost a minute per host.
   A dependent fails the suite when its import error involves a patched module (a
   missing name, or a traceback frame inside a patched file); other errors (e.g. a CUDA
   kernel package absent on this host) are reported as unavailable, not as failures.
"""

import ast
import json
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

from _suite import Suite

_PROBE = r"""
import importlib, json, sys, traceback
out = {}
for name in json.loads(sys.argv[1]):
    try:
        importlib.import_module(name)
        out[name] = None
    except BaseException as exc:
        frames = [f.filename for f in traceback.extract_tb(exc.__traceback__)]
        out[name] = {"error": f"{type(exc).__name__}: {exc}", "frames": frames,
                     "tail": traceback.format_exc()[-1500:]}
print(json.dumps(out))
"""


def import_in_fresh_process(names, timeout_s=600):
    """name -> None or {error, frames, tail}, from one new interpreter."""
    done = subprocess.run(
        [sys.executable, "-c", _PROBE, json.dumps(names)],
        capture_output=True,
        text=True,
        timeout=timeout_s,
    )
    lines = [ln for ln in done.stdout.splitlines() if ln.startswith("{")]
    if not lines:
        err = {
            "error": f"interpreter died (exit {done.returncode})",
            "frames": [],
            "tail": done.stderr[-1500:],
        }
        return {name: err for name in names}
    return json.loads(lines[-1])


def imported_modules(path, package):
    """Absolute module names a source file imports (relative imports resolved)."""
    with open(path, encoding="utf-8") as fh:
        tree = ast.parse(fh.read(), path)
    found = set()
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
    text = failure["error"]
    return any(m in text for m in patched) or any(f in patched_files for f in failure["frames"])


def main():
    suite = Suite("imports")
    site = suite.input.get("site_packages") or ""
    patched = suite.input.get("modules", [])
    patched_files = {os.path.join(site, f["path"]) for f in suite.input.get("files", [])}
    workers = max(1, min(len(patched), os.cpu_count() or 1))
    with ThreadPoolExecutor(workers) as pool:
        own = dict(zip(patched, pool.map(lambda m: import_in_fresh_process([m])[m], patched)))
    for name, failure in own.items():
        suite.check(name, failure is None, "ok" if failure is None else failure["tail"])
    dependents = find_dependents(site, patched)
    unavailable = {}
    if dependents:
        for name, failure in import_in_fresh_process(dependents).items():
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
