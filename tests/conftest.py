"""Shared fixtures: the sandbox base env and a factory for real sshd test hosts."""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest


def sandbox_skip_reason() -> str | None:
    """Return why sandbox hosts cannot run here, or None when they can."""
    if os.geteuid() != 0:
        return "sandbox hosts need root (per-host mount namespaces, sshd logging in as root)"
    if not Path("/usr/sbin/sshd").exists():
        return "sandbox hosts need openssh-server (/usr/sbin/sshd is missing)"
    if shutil.which("unshare") is None or shutil.which("nsenter") is None:
        return "sandbox hosts need util-linux unshare and nsenter"
    return None


@pytest.fixture(scope="session")
def base_env():
    """The cached sandbox base env (built on first use: about a minute, needs the index)."""
    reason = sandbox_skip_reason()
    if reason:
        pytest.skip(reason)
    from ddtree_sandbox import ensure_base_env

    return ensure_base_env()


@pytest.fixture(scope="session")
def docker_daemon(base_env):
    """The session's PRIVATE dockerd (sandbox/ddtree_sandbox/docker_daemon.py) with the
    sandbox's Debian image imported: systemd hosts and container targets run on it. A
    missing docker.io or a daemon that does not start is an error, never a skip. Stopped
    at the end with every container it ran (by id)."""
    import tempfile

    from ddtree_sandbox.docker_daemon import start_daemon

    root = Path(tempfile.mkdtemp(prefix="ddtree-docker-", dir="/tmp"))
    daemon = start_daemon(root)
    try:
        daemon.ensure_image()
        yield daemon
    finally:
        daemon.stop()
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture
def sandbox_factory(base_env, tmp_path_factory, request) -> Iterator[Callable[..., object]]:
    """Start sandboxes with ``sandbox_factory(count, **start_sandbox_kwargs)``; all are stopped
    at teardown. Addresses are picked free (``first_octet=None``) unless given."""
    from ddtree_sandbox import start_sandbox

    started = []

    def start(count: int = 1, **kwargs):
        kwargs.setdefault("first_octet", None)
        # The deploy-core tests (pipeline, fleet, faults, security, smoke suites other than
        # `server`) keep the stub: they need its fault knobs (fail_start, never_ready,
        # startup_delay_s), restart it dozens of times (0.5 s vs 12-25 s for a real server)
        # and run up to 6 hosts (a real server is ~1.9 GB RSS). Serving is proven on the
        # real server in tests/serving/ (service="sglang").
        kwargs.setdefault("service", "stub")
        version = kwargs.get("sglang_version", base_env.sglang_version)
        kwargs.setdefault("base_env", base_env if version == base_env.sglang_version else None)
        if kwargs.get("service_kind") == "systemd":  # containers with real systemd
            kwargs.setdefault("docker", request.getfixturevalue("docker_daemon"))
        sandbox = start_sandbox(tmp_path_factory.mktemp("sandbox"), count, **kwargs)
        started.append(sandbox)
        return sandbox

    yield start
    for sandbox in started:
        sandbox.stop()
