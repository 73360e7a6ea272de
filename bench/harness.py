"""Bench hosts: sandbox sshd hosts behind delay proxies, the instant service, inventories for
ddtree-deploy, Ansible and Fabric, pre-materialised result files, and a pristine reset.

Every tool reaches host i through the same proxy port on 127.0.0.1, with a known_hosts file
whose lines name ``[127.0.0.1]:PROXYPORT`` and carry host i's real key, so host keys stay
strictly checked.
"""

from __future__ import annotations

import hashlib
import json
import os
import resource
import shutil
import sys
from dataclasses import dataclass, field
from pathlib import Path

from latency_proxy import DelayProxy

from ddtree_deploy.agent.host.pure import apply_unified_diff
from ddtree_deploy.patchset import load_patchset
from ddtree_deploy.stages.prepared import PreparedPatchset, prepare_patchset
from ddtree_sandbox import Sandbox, SandboxHost, start_sandbox
from ddtree_sandbox.inventory_file import render_toml

BENCH_DIR = Path(__file__).resolve().parent
REPO = BENCH_DIR.parent
SERVICE_SOURCE = BENCH_DIR / "instant_service.py"
SERVICE_PORT = 30000
BROKEN_MARKER = "BENCH_UNHEALTHY"
BACKUP_DIR = "/var/lib/ddtree-deploy/bench-backup"  # where Ansible and Fabric back up


@dataclass
class BenchHosts:
    """A running sandbox, one delay proxy per host, and the files every tool needs."""

    sandbox: Sandbox
    proxies: list[DelayProxy]
    workdir: Path
    prepared: PreparedPatchset
    results: dict[str, bytes]  # relative path -> result bytes (what each tool installs)
    known_hosts: Path = field(init=False)

    def __post_init__(self) -> None:
        self.known_hosts = self.workdir / "known_hosts.proxied"

    @property
    def hosts(self) -> list[SandboxHost]:
        return self.sandbox.hosts

    @property
    def python(self) -> str:
        return self.hosts[0].python

    @property
    def site_packages(self) -> str:
        return self.hosts[0].site_packages

    def service_argv(self, action: str) -> str:
        return f"{self.python} {self.hosts[0].service_dir}/instant_service.py {action}"

    def health_url(self, host: SandboxHost) -> str:
        return f"http://{host.address}:{SERVICE_PORT}/health_generate"

    def set_rtt(self, rtt_s: float) -> None:
        """New connections through every proxy see this round-trip time."""
        for proxy in self.proxies:
            proxy.rtt_s = rtt_s

    def write_known_hosts(self) -> None:
        """Host i's key under the name ``[127.0.0.1]:PROXYPORT``."""
        keys = {}
        for line in self.sandbox.known_hosts.read_text().splitlines():
            name, key_type, key_b64 = line.split()[:3]
            keys[name] = f"{key_type} {key_b64}"
        lines = [
            f"[127.0.0.1]:{proxy.port} {keys[f'[{host.address}]:{host.port}']}"
            for host, proxy in zip(self.hosts, self.proxies, strict=True)
        ]
        self.known_hosts.write_text("\n".join(lines) + "\n")

    def write_ddtree_inventory(self, count: int, ready_timeout_s: float = 30.0) -> Path:
        """ddtree-deploy's TOML inventory for the first ``count`` hosts, via the proxies."""
        service = {
            "kind": "command",
            "start": self.service_argv("start"),
            "stop": self.service_argv("stop"),
            "status": self.service_argv("status"),
            "ready_timeout_s": ready_timeout_s,
            "poll_interval_s": 0.1,
        }
        defaults = {
            "user": "root",
            "python": self.python,
            "identity_file": str(self.sandbox.identity_file),
            "known_hosts": str(self.known_hosts),
            "state_dir": self.hosts[0].state_dir,
            "gpus": 0,
            "service": service,
        }
        hosts = {
            host.name: {
                "address": "127.0.0.1",
                "port": proxy.port,
                "groups": ["bench"],
                "service": {"health_url": self.health_url(host)},
            }
            for host, proxy in list(zip(self.hosts, self.proxies, strict=True))[:count]
        }
        path = self.workdir / f"inventory-{count}.toml"
        path.write_text(render_toml({"defaults": defaults, "hosts": hosts}))
        return path

    def write_ansible_inventory(self, count: int) -> Path:
        """Ansible's INI inventory for the first ``count`` hosts, via the proxies."""
        lines = ["[bench]"]
        for host, proxy in list(zip(self.hosts, self.proxies, strict=True))[:count]:
            lines.append(
                f"{host.name} ansible_host=127.0.0.1 ansible_port={proxy.port} "
                f"health_url={self.health_url(host)}"
            )
        lines += [
            "",
            "[bench:vars]",
            "ansible_user=root",
            f"ansible_ssh_private_key_file={self.sandbox.identity_file}",
            f"ansible_python_interpreter={self.python}",
        ]
        path = self.workdir / f"ansible-{count}.ini"
        path.write_text("\n".join(lines) + "\n")
        return path

    def write_results(self) -> Path:
        """The result files under workdir/files/ and their sha1 (for Ansible's `checksum`)."""
        root = self.workdir / "files"
        entries = []
        for rel, data in self.results.items():
            (root / rel).parent.mkdir(parents=True, exist_ok=True)
            (root / rel).write_bytes(data)
            entries.append(
                {
                    "path": rel,
                    "src": str(root / rel),
                    "sha1": hashlib.sha1(data).hexdigest(),
                    "sha256": hashlib.sha256(data).hexdigest(),
                    "existed": (self.sandbox.base_env.sglang_dir / rel).exists(),
                }
            )
        manifest = self.workdir / "files.json"
        manifest.write_text(json.dumps(entries, indent=2) + "\n")
        return manifest

    def install_service(self, host: SandboxHost, broken_on_marker: bool = True) -> None:
        """Copy the instant service onto the host and write its settings."""
        shutil.copyfile(SERVICE_SOURCE, host.service_dir_on_disk / "instant_service.py")
        config = {"host": host.address, "port": SERVICE_PORT}
        if broken_on_marker:
            marker_file = f"{host.site_packages}/{self.prepared.paths[0]}"
            config |= {"marker_file": marker_file, "marker": BROKEN_MARKER}
        (host.service_dir_on_disk / "instant.json").write_text(json.dumps(config) + "\n")

    def reset(self, count: int) -> None:
        """Put the first ``count`` hosts back to pristine sglang files with the service up.

        Runs on the controller's view of each host dir (no SSH): each patched path gets the
        pristine bytes back (or is removed if sglang has no such file), its bytecode goes, the
        Ansible/Fabric backup dir goes, and the service is (re)started if it is down.
        """
        pristine_root = self.sandbox.base_env.sglang_dir
        for host in self.hosts[:count]:
            for rel in self.prepared.paths:
                target = host.site_packages_on_disk / rel
                original = pristine_root / rel
                if original.exists():
                    shutil.copy2(original, target)
                else:
                    target.unlink(missing_ok=True)
                cache = target.parent / "__pycache__"
                for pyc in cache.glob(f"{target.stem}.*.pyc"):
                    pyc.unlink()
            shutil.rmtree(host.state_dir_on_disk / "bench-backup", ignore_errors=True)
            status = host.run([self.python, f"{host.service_dir}/instant_service.py", "status"])
            if status.returncode != 0:
                host.run([self.python, f"{host.service_dir}/instant_service.py", "start"])

    def stop(self) -> None:
        for host in self.hosts:
            host.run([self.python, f"{host.service_dir}/instant_service.py", "stop"])
        for proxy in self.proxies:
            proxy.stop()
        self.sandbox.stop()


def build_results(prepared: PreparedPatchset, pristine_root: Path) -> dict[str, bytes]:
    """Each file's result bytes: new files as shipped, patches applied to pristine sglang;
    raises RuntimeError if a result's sha256 differs from the lock."""
    results = {}
    for entry in prepared.files:
        if entry.kind == "patch":
            base = (pristine_root / entry.path).read_text(encoding="utf-8")
            data = apply_unified_diff(base, entry.source.decode()).encode()
        else:
            data = entry.source
        if hashlib.sha256(data).hexdigest() != entry.result_sha256:
            raise RuntimeError(f"{entry.path}: materialised result differs from the lock")
        results[entry.path] = data
    return results


def start_bench_hosts(workdir: Path, count: int, patchsets_dir: Path, rtt_s: float) -> BenchHosts:
    """Start ``count`` sandbox hosts, a proxy each, the instant service; write known_hosts."""
    workdir.mkdir(parents=True, exist_ok=True)
    sandbox = start_sandbox(workdir / "sandbox", count, first_octet=None, service="stub")
    try:
        proxies = [DelayProxy((host.address, host.port), rtt_s).start() for host in sandbox.hosts]
        prepared = prepare_patchset(load_patchset(patchsets_dir / "ddtree" / "1.0.0"))
        results = build_results(prepared, sandbox.base_env.sglang_dir)
        bench = BenchHosts(sandbox, proxies, workdir, prepared, results)
        bench.write_known_hosts()
        for host in sandbox.hosts:
            bench.install_service(host)
        bench.reset(count)
    except BaseException:
        sandbox.stop()
        raise
    return bench


def machine_cpu_s() -> float:
    """Busy CPU seconds of the whole machine since boot (/proc/stat: all but idle, iowait)."""
    fields = Path("/proc/stat").read_text().splitlines()[0].split()[1:]
    ticks = [int(value) for value in fields]
    busy = sum(ticks) - ticks[3] - ticks[4]  # idle, iowait
    return busy / os.sysconf("SC_CLK_TCK")


def own_cpu_s() -> float:
    """CPU seconds of this bench process (its delay proxies' threads)."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)
