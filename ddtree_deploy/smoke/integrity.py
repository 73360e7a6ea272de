"""Smoke suite `integrity`: every deployed file's sha256 equals the lock's result hash."""

import hashlib
import os

from _suite import Suite


def file_sha256(path):
    try:
        with open(path, "rb") as fh:
            return hashlib.sha256(fh.read()).hexdigest()
    except FileNotFoundError:
        return None


def main():
    suite = Suite("integrity")
    site = suite.input.get("site_packages") or ""
    for f in suite.input.get("files", []):
        path = os.path.join(site, f["path"])
        actual = file_sha256(path)
        if actual == f["result_sha256"]:
            suite.check(f["path"], True, "ok")
        elif actual is None:
            suite.check(f["path"], False, f"{path}: missing (lock expects {f['result_sha256']})")
        else:
            suite.check(f["path"], False, f"{path}: sha256 {actual} != lock {f['result_sha256']}")
    suite.finish()


if __name__ == "__main__":
    main()
