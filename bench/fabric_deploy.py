"""Scenario A the naive Fabric way: one put per file, one command per step, a thread per host.

Usage: ``python bench/fabric_deploy.py PLAN_JSON``; PLAN_JSON holds ``hosts`` (name, port,
health_url), ``known_hosts``, ``identity_file``, ``files`` (the files.json entries), ``site``,
``backup_dir``, ``python``, ``service_stop``, ``service_start``. Host keys are checked
against ``known_hosts`` (unknown keys refused). Exit 0 when every host ends healthy.
"""

from __future__ import annotations

import json
import shlex
import sys
import threading
import time

import paramiko
from fabric import Connection


def deploy_host(plan: dict, host: dict) -> None:
    """Every step on one host; raises on the first failure (Fabric's default)."""
    conn = Connection(
        "127.0.0.1",
        user="root",
        port=host["port"],
        connect_kwargs={"key_filename": [plan["identity_file"]]},
    )
    conn.client.set_missing_host_key_policy(paramiko.RejectPolicy())
    conn.client.load_host_keys(plan["known_hosts"])
    site, backup = plan["site"], plan["backup_dir"]
    quiet = {"hide": True, "in_stream": False}
    try:
        conn.run(f"mkdir -p -m 700 {shlex.quote(backup)}", **quiet)
        for item in plan["files"]:
            if item["existed"]:
                flat = item["path"].replace("/", "__")
                conn.run(f"cp -p {site}/{item['path']} {backup}/{flat}", **quiet)
        for item in plan["files"]:
            conn.put(item["src"], f"{site}/{item['path']}")
        for item in plan["files"]:
            out = conn.run(f"sha256sum {site}/{item['path']}", **quiet).stdout.split()[0]
            if out != item["sha256"]:
                raise RuntimeError(f"{host['name']}: {item['path']} sha256 {out} after upload")
        paths = " ".join(f"{site}/{item['path']}" for item in plan["files"])
        conn.run(f"{plan['python']} -m py_compile {paths}", **quiet)
        conn.run(plan["service_stop"], **quiet)
        conn.run(plan["service_start"], **quiet)
        deadline = time.monotonic() + 60
        probe = f"curl -fsS -o /dev/null {shlex.quote(host['health_url'])}"
        while not conn.run(probe, warn=True, **quiet).ok:
            if time.monotonic() > deadline:
                raise RuntimeError(f"{host['name']}: not healthy after 60 s")
            time.sleep(0.1)
    finally:
        conn.close()


def main() -> int:
    with open(sys.argv[1]) as fh:
        plan = json.load(fh)
    errors: dict[str, str] = {}

    def worker(host: dict) -> None:
        try:
            deploy_host(plan, host)
        except Exception as exc:  # report every host, then fail
            errors[host["name"]] = f"{type(exc).__name__}: {exc}"

    threads = [threading.Thread(target=worker, args=(host,)) for host in plan["hosts"]]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    for name, error in errors.items():
        print(f"{name}: {error}", file=sys.stderr)
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
