"""Smoke suite `compile`: py_compile every deployed .py file with the host's python."""

import os
import py_compile

from _suite import Suite


def main():
    suite = Suite("compile")
    site = suite.input.get("site_packages") or ""
    for f in suite.input.get("files", []):
        if not f["path"].endswith(".py"):
            continue
        path = os.path.join(site, f["path"])
        try:
            py_compile.compile(path, doraise=True)
            suite.check(f["path"], True, "ok")
        except py_compile.PyCompileError as exc:
            suite.check(f["path"], False, f"{path}: {str(exc.msg).strip()}")
    suite.finish()


if __name__ == "__main__":
    main()
