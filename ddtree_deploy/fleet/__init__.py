"""Many hosts: bounded parallelism (and later canary/waves)."""

from ddtree_deploy.fleet.run import HostFn, run_hosts, run_one

__all__ = ["HostFn", "run_hosts", "run_one"]
