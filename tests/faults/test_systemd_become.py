"""`become = "sudo"` on a host whose server is a REAL systemd unit: the login is the
unprivileged `ddtree-deploy` user inside the host's container (systemd 252 as PID 1, the
image's real sudo), the agent and every `systemctl` run as root through `sudo -n`.

A push installs root-owned files and restarts `sglang.service` through systemd (a new
MainPID, NRestarts 0); a rollback restores the tree byte for byte. The control: the same
host without the sudoers rule refuses the push at once (exit 2, "password required"), and
nothing on the host changed.
"""

from __future__ import annotations

import os
import stat
import tomllib
from pathlib import Path

import pytest

from ddtree_sandbox.inventory_file import render_toml
from tests.support import make_patchset, run_cli
from tests.targets.become_sandbox import LOGIN_USER

pytestmark = [pytest.mark.hosts, pytest.mark.slow]
SUDOERS = "/etc/sudoers.d/ddtree-become"
RULE = f"{LOGIN_USER} ALL=(root) NOPASSWD: ALL"
SITE = "/srv/venv/lib/python3.11/site-packages"


def in_container(host, script: str) -> str:
    done = host.run(["/bin/sh", "-c", script])
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def unit(host) -> dict[str, str]:
    text = in_container(host, "systemctl show sglang -p MainPID -p NRestarts -p ActiveState")
    return dict(line.split("=", 1) for line in text.splitlines())


def let_user_read_keys(workdir: Path) -> None:
    """sshd (in the container) reads the shared AuthorizedKeysFile as the login user: make
    the key readable and every directory above it traversable (as become_sandbox does)."""
    keys = workdir / "authorized_keys"
    keys.chmod(keys.stat().st_mode | stat.S_IRGRP | stat.S_IROTH)
    for directory in [workdir, *workdir.parents]:
        if directory == Path("/"):
            break
        mode = directory.stat().st_mode
        os.chmod(directory, stat.S_IMODE(mode) | stat.S_IXGRP | stat.S_IXOTH)


@pytest.fixture
def become_unit_host(sandbox_factory, tmp_path):
    sandbox = sandbox_factory(1, service_kind="systemd")
    host = sandbox.hosts[0]
    in_container(
        host,
        f"id -u {LOGIN_USER} >/dev/null 2>&1 || useradd --system --no-create-home "
        f"--home-dir /nonexistent --shell /bin/sh --password '*' {LOGIN_USER}; "
        f"printf '%s\\n' '{RULE}' > {SUDOERS} && chmod 0440 {SUDOERS}",
    )
    let_user_read_keys(sandbox.workdir)
    data = tomllib.loads(sandbox.inventory_path.read_text())
    data["defaults"]["user"] = LOGIN_USER
    data["hosts"]["host0"]["become"] = "sudo"
    sandbox.inventory_path.write_text(render_toml(data))
    return sandbox, make_patchset(tmp_path / "fast")


def cli(sandbox, patchsets: Path, *args: str):
    extra = ["-i", str(sandbox.inventory_path)]
    if args[0] == "push":
        extra += ["--patchsets-dir", str(patchsets)]
    return run_cli(*args, *extra)


def test_push_and_rollback_through_sudo_on_a_real_systemd_unit(become_unit_host):
    sandbox, patchsets = become_unit_host
    host = sandbox.hosts[0]
    assert in_container(host, f"su -s /bin/sh -c 'sudo -n -l' {LOGIN_USER} | tail -1").endswith(
        "NOPASSWD: ALL"
    )
    tree, before = host.tree_digest(), unit(host)
    push = cli(sandbox, patchsets, "push", "-H", "host0", "--json")
    assert push.returncode == 0, push.stderr[-3000:]
    after = unit(host)
    assert after["ActiveState"] == "active" and after["NRestarts"] == "0", after
    assert after["MainPID"] != before["MainPID"]  # systemctl stop + start, run through sudo
    changed = [p for p, h in host.tree_digest().items() if tree.get(p) != h]
    assert changed, "the push changed no file"
    owners = in_container(
        host, " ".join(["stat -c %u:%g", *(f"{SITE}/sglang/{p}" for p in changed)])
    )
    assert set(owners.split()) == {"0:0"}, owners  # written by root, through sudo
    back = cli(sandbox, patchsets, "rollback", "-H", "host0", "--json")
    assert back.returncode == 0, back.stderr[-3000:]
    assert host.tree_digest() == tree
    assert unit(host)["ActiveState"] == "active"


def test_control_without_the_sudo_rule_the_push_is_refused_and_nothing_changes(
    become_unit_host,
):
    sandbox, patchsets = become_unit_host
    host = sandbox.hosts[0]
    in_container(host, f"rm -f {SUDOERS}")
    tree, before = host.tree_digest(), unit(host)
    push = cli(sandbox, patchsets, "push", "-H", "host0", "--json")
    assert push.returncode == 2, push.stderr[-3000:]
    assert "become: password required" in push.stderr, push.stderr[-2000:]
    assert host.tree_digest() == tree and unit(host) == before
