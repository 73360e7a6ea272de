"""Sandbox hosts that a non-root user reaches over SSH and leaves through sudo.

Every host's sshd runs in its own mount namespace (start_sandbox); `customize` bind-mounts
a per-host sudoers.d over /etc/sudoers.d there, so each host has its own sudo policy while
the machine's stays untouched. The login user is `ddtree-deploy` (sandbox/users.py); sshd
reads the shared AuthorizedKeysFile as that user, so the sandbox's workdir is made
traversable (0711) and the key file readable. The hosts' venv (/srv) and state dir stay
root-owned, as on a fleet where root SSH is forbidden.
"""

from __future__ import annotations

import os
import shutil
import stat
import tempfile
import tomllib
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from ddtree_sandbox.inventory_file import render_toml

LOGIN_USER = "ddtree-deploy"
SUDOERS_FILE = "ddtree-become"
SUDOERS_MAIN = Path("/etc/sudoers")
# No sudo on the login PATH: the shell answers "sudo: not found", as on a host without it.
NO_SUDO_PATH = "/nonexistent-bin"


def require_sudo() -> None:
    """Fail (never skip) when this machine cannot run the become tests: sudo missing, or
    /etc/sudoers not reading /etc/sudoers.d (where each host's rules are mounted)."""
    if shutil.which("sudo") is None:
        pytest.fail("sudo is missing: install it (make deps; .ci/run installs it)")
    text = SUDOERS_MAIN.read_text()
    if not any(
        line.split()[:2] in (["@includedir", "/etc/sudoers.d"], ["#includedir", "/etc/sudoers.d"])
        for line in text.splitlines()
    ):
        pytest.fail(f"{SUDOERS_MAIN} does not include /etc/sudoers.d: per-host rules cannot load")


def write_sudoers(directory: Path, rules: str) -> Path:
    """A sudoers.d directory holding `rules` (root-owned, mode 0440, as sudo demands)."""
    directory.mkdir(parents=True, exist_ok=True)
    os.chmod(directory, 0o755)
    path = directory / SUDOERS_FILE
    path.write_text(rules)
    os.chown(path, 0, 0)
    os.chmod(path, 0o440)
    return directory


def start_become_sandbox(
    base_env, rules: dict[str, str | None], no_sudo: tuple[str, ...] = ()
) -> Iterator:
    """Start one sandbox host per entry of `rules` (name -> sudoers rules, None for an empty
    sudoers.d; `no_sudo` names hosts whose login PATH has no sudo); yield the Sandbox,
    stop it and remove its files afterwards."""
    from ddtree_sandbox import start_sandbox
    from ddtree_sandbox.users import ensure_login_user

    require_sudo()
    ensure_login_user(LOGIN_USER)
    workdir = Path(tempfile.mkdtemp(prefix="ddtree-become-", dir="/tmp"))
    os.chmod(workdir, 0o711)  # sshd reads workdir/authorized_keys as the login user
    sudoers = {
        name: write_sudoers(workdir / "sudoers" / name, text or "") for name, text in rules.items()
    }

    def customize(host, spec):
        binds = (*spec.extra_binds, (str(sudoers[host.name]), "/etc/sudoers.d"))
        config = spec.extra_config
        if host.name in no_sudo:
            config = (*config, f"SetEnv PATH={NO_SUDO_PATH}")
        return replace(spec, extra_binds=binds, extra_config=config)

    sandbox = start_sandbox(
        workdir / "sandbox",
        len(rules),
        names=list(rules),
        base_env=base_env,
        service="stub",
        first_octet=None,
        customize=customize,
    )
    try:
        keys = sandbox.workdir / "authorized_keys"
        keys.chmod(keys.stat().st_mode | stat.S_IRGRP | stat.S_IROTH)
        os.chmod(sandbox.workdir, 0o711)
        yield sandbox
    finally:
        sandbox.stop()
        shutil.rmtree(workdir, ignore_errors=True)


def write_become_inventory(sandbox, path: Path, become: dict[str, dict]) -> Path:
    """The sandbox's inventory with the login user set to LOGIN_USER and, per host, the
    keys in `become` (e.g. {"become": "sudo"}); returns `path`."""
    data = tomllib.loads(sandbox.inventory_path.read_text())
    data["defaults"]["user"] = LOGIN_USER
    for name, keys in become.items():
        data["hosts"][name].update(keys)
    path.write_text(render_toml(data))
    return path
