"""``python -m ddtree_sandbox up|down|status``: run sandbox hosts for demos and benches.

``up`` prints the inventory path on stdout (data); progress and timings go to stderr.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ddtree_sandbox.baseenv import DEFAULT_SGLANG_VERSION
from ddtree_sandbox.hosts import start_sandbox, stop_sandbox
from ddtree_sandbox.processes import is_running, read_pid_file


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m ddtree_sandbox")
    sub = parser.add_subparsers(dest="command", required=True)
    up = sub.add_parser("up", help="start hosts and write WORKDIR/inventory.toml")
    up.add_argument("--workdir", type=Path, default=Path(".sandbox"))
    up.add_argument("--hosts", type=int, default=3)
    up.add_argument("--sglang-version", default=DEFAULT_SGLANG_VERSION)
    up.add_argument(
        "--service",
        choices=("sglang", "stub"),
        default="sglang",
        help="a real sglang server per host (default; sglang 0.5.13.post1 only) or the "
        "sglang-shaped test stub",
    )
    up.add_argument(
        "--first-octet",
        type=lambda value: None if value == "auto" else int(value),
        default=11,
        help="host i gets 127.0.0.(N+i); 'auto' picks the first free block",
    )
    demo = sub.add_parser("demo", help="hosts up, then push/status/broken push/rollback")
    demo.add_argument("--workdir", type=Path, default=Path(".sandbox"))
    demo.add_argument("--hosts", type=int, default=2)
    ref = sub.add_parser(
        "reference", help="record a patchset's lossless references on plain sandbox servers"
    )
    ref.add_argument("--patchset", type=Path, required=True, help="e.g. patchsets/ddtree/1.1.0")
    ref.add_argument("--workdir", type=Path, default=Path(".sandbox-reference"))
    for name, help_text in (("down", "stop every host"), ("status", "show what runs")):
        command = sub.add_parser(name, help=help_text)
        command.add_argument("--workdir", type=Path, default=Path(".sandbox"))
    args = parser.parse_args(argv)
    if args.command == "up":
        try:
            sandbox = start_sandbox(
                args.workdir,
                args.hosts,
                args.sglang_version,
                first_octet=args.first_octet,
                service=args.service,
            )
        except (RuntimeError, ValueError) as exc:
            print(f"sandbox: {exc}", file=sys.stderr)
            return 1
        timings = ", ".join(f"{k} {v:.2f}" for k, v in sandbox.timings_s.items())
        print(f"sandbox: {len(sandbox.hosts)} hosts up ({timings})", file=sys.stderr)
        print(sandbox.inventory_path)
        return 0
    if args.command == "demo":
        from ddtree_sandbox.demo import run_demo

        return run_demo(args.workdir, args.hosts)
    if args.command == "reference":
        from ddtree_sandbox.reference import make_references

        for path in make_references(args.patchset.resolve(), args.workdir.resolve()):
            print(path)
        return 0
    if args.command == "down":
        stopped = stop_sandbox(args.workdir)
        stopped &= stop_sandbox(args.workdir / "systemd")  # the demo's systemd host, if any
        print("sandbox: stopped" if stopped else "sandbox: some processes remain", file=sys.stderr)
        return 0 if stopped else 1
    return print_status(args.workdir)


def print_status(workdir: Path) -> int:
    """Print one line per host (sshd and stub service state); return 0 if all sshds run."""
    hosts_dir = workdir.resolve() / "hosts"
    hostdirs = sorted(hosts_dir.iterdir()) if hosts_dir.is_dir() else []
    if not hostdirs:
        print(f"no sandbox hosts under {workdir}", file=sys.stderr)
        return 1
    all_up = True
    for hostdir in hostdirs:
        sshd_pid = read_pid_file(hostdir / "sshd.pid")
        service_pid = read_pid_file(hostdir / "srv" / "service" / "server.pid")
        sshd_up = sshd_pid is not None and is_running(sshd_pid)
        service_up = service_pid is not None and is_running(service_pid)
        all_up &= sshd_up
        print(
            f"{hostdir.name}\tsshd {'up pid ' + str(sshd_pid) if sshd_up else 'down'}"
            f"\tservice {'up pid ' + str(service_pid) if service_up else 'down'}"
        )
    return 0 if all_up else 1


if __name__ == "__main__":
    sys.exit(main())
