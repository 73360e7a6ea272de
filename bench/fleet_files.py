"""What a fleet's ssh_config and known_hosts cost the controller per host, by fleet size.

Usage: ``python bench/fleet_files.py [--sizes 100 1000 4000] [--runs 3] [--against REV]``.
For each size N it writes what an inventory tool writes for N hosts: an ssh_config with one
`Host` block per host (HostName, User, Port, IdentityFile; as `gcloud compute config-ssh`
does) and a `Host *` block, and a known_hosts listing each host, plain and hashed (OpenSSH's
`HashKnownHosts yes`, Debian's and Ubuntu's default). A fresh process then does for every
host what a push does before its handshake: resolve the route (`SSHTransport.resolve`:
ssh_config) and read the keys known for it (`ssh_hops.read_known_keys`), and prints the CPU
seconds that took. With ``--against REV`` the same runs use REV's tree too (a git worktree),
interleaved run by run, so the two columns share the machine's state. No network, no hosts.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import paramiko

ROOT = Path(__file__).resolve().parent.parent
PUBLIC_KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl"

# Run in a fresh process with the tree under test first on sys.path; prints CPU seconds.
CHILD = """
import json, sys, time
from ddtree_deploy.inventory import parse_inventory
from ddtree_deploy.transport.ssh import SSHTransport
from ddtree_deploy.transport.ssh_hops import read_known_keys
n, known_hosts = int(sys.argv[1]), sys.argv[2]
hosts = parse_inventory({"hosts": {f"h{i}": {"address": f"gpu{i}", "known_hosts": known_hosts}
                                   for i in range(n)}}, "bench.toml").hosts
start = time.process_time()
found = 0
for host in hosts.values():
    hops = SSHTransport(host).resolve()
    found += len(read_known_keys(hops[-1])[0])
print(json.dumps({"cpu_s": time.process_time() - start, "keys": found}))
"""


def write_files(workdir: Path, n: int) -> dict[str, Path]:
    """ssh_config and two known_hosts (plain, hashed) for hosts gpu0..gpuN-1 on port 2222."""
    config = workdir / f"ssh_config-{n}"
    config.write_text(
        "".join(
            f"Host gpu{i}\n  HostName 10.{i // 65536}.{i // 256 % 256}.{i % 256}\n"
            f"  User ubuntu\n  Port 2222\n  IdentityFile ~/.ssh/google_compute_engine\n\n"
            for i in range(n)
        )
        + "Host *\n  ServerAliveInterval 30\n"
    )
    plain, hashed = workdir / f"known_hosts-{n}", workdir / f"known_hosts-hashed-{n}"
    names = [f"[10.{i // 65536}.{i // 256 % 256}.{i % 256}]:2222" for i in range(n)]
    plain.write_text("".join(f"{name} {PUBLIC_KEY}\n" for name in names))
    hashed.write_text(
        "".join(f"{paramiko.HostKeys.hash_host(name)} {PUBLIC_KEY}\n" for name in names)
    )
    return {"ssh_config": config, "plain": plain, "hashed": hashed}


def run_child(tree: Path, n: int, files: dict[str, Path], known: str) -> float:
    env = {
        **os.environ,
        "PYTHONPATH": str(tree),
        "DDTREE_DEPLOY_SSH_CONFIG": str(files["ssh_config"]),
    }
    out = subprocess.run(
        [sys.executable, "-c", CHILD, str(n), str(files[known])],
        env=env, cwd=tree, capture_output=True, text=True, check=True,
    )  # fmt: skip
    answer = json.loads(out.stdout)
    if answer["keys"] != n:
        raise SystemExit(f"{tree}: {answer['keys']} keys found for {n} hosts")
    return answer["cpu_s"]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[100, 1000, 4000])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--against", help="a git revision to measure beside this tree")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="ddtree-fleet-files-") as tmp:
        workdir = Path(tmp)
        trees = {"this tree": ROOT}
        if args.against:
            other = workdir / "against"
            subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "-q", "--detach",
                            str(other), args.against], check=True)  # fmt: skip
            trees = {args.against: other, **trees}
        try:
            for n in args.sizes:
                files = write_files(workdir, n)
                for known in ("plain", "hashed"):
                    taken: dict[str, list[float]] = {name: [] for name in trees}
                    for _ in range(args.runs):
                        for name, tree in trees.items():
                            taken[name].append(run_child(tree, n, files, known))
                    cells = ", ".join(
                        f"{name}: {statistics.median(s):.3f} s = "
                        f"{statistics.median(s) / n * 1000:.2f} ms/host"
                        for name, s in taken.items()
                    )
                    print(f"{n} hosts, known_hosts {known}: {cells}", flush=True)
        finally:
            if args.against:
                subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force",
                                str(workdir / "against")], check=False)  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
