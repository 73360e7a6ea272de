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
        actual = file_sha256(os.path.join(site, f["path"]))
        suite.check(
            f["path"],
            actual == f["result_sha256"],
            "ok" if actual == f["result_sha256"]
            else f"sha256 {actual} != lock {f['result_sha256']} in {site}",
        )
    suite.finish()


if __name__ == "__main__":
    main()
