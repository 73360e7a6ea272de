"""ssh_config for a fleet (transport/ssh_config.py): the files parsed once per run, each lookup
over the blocks that can apply to the alias, and every answer equal to Paramiko's own lookup
over the whole files."""

from __future__ import annotations

import os
import threading

import paramiko
import pytest

from ddtree_deploy.errors import RouteError
from ddtree_deploy.transport import ssh_config
from ddtree_deploy.transport.filecache import FileCache
from ddtree_deploy.transport.ssh_config import FleetSSHConfig, read_ssh_config

# Every kind of block Paramiko knows, around literal blocks an inventory tool would write.
USER_CONFIG = """\
ServerAliveInterval 40
IdentityFile ~/.ssh/first

Host gpu1
  HostName 10.0.0.1
  User one
  IdentityFile ~/.ssh/gpu1

Host gpu2 gpu3
  HostName 10.0.0.23
  Port 2202

Host gpu[45]
  User bracket

Host gpu3 !gpu3
  User never

Host gpu5 !gpu*
  User never-either

Host !gpu6
  User not-even-gpu6

Host gpu*
  User wildcard
  ConnectTimeout 7

Host * !gpu3
  ProxyJump bastion

Host "gpu 9"
  HostName 10.0.0.9

Host GPU7
  User upper

Match host 10.0.0.*
  IdentityFile ~/.ssh/by-hostname

Match originalhost gpu6
  Port 2206

Match user one
  ForwardAgent yes

Host gpu1
  User second-wins-not
  IdentityFile ~/.ssh/gpu1-again

Host gpu8 *.lab
  Port 2208

Match all
  StrictHostKeyChecking yes
"""
SYSTEM_CONFIG = """\
Compression yes

Host gpu2
  User from-system
  ConnectTimeout 3

Host *
  SendEnv LANG LC_*
"""
ALIASES = ["gpu1", "gpu2", "gpu3", "gpu4", "gpu5", "gpu6", "gpu7", "GPU7", "gpu8", "gpu 9",
           "x.lab", "gpu10", "bastion", "other", "10.0.0.1", "!gpu6"]  # fmt: skip


def _paramiko_over_all(*texts: str) -> paramiko.SSHConfig:
    config = paramiko.SSHConfig()
    for text in texts:
        config.parse(iter(text.splitlines(keepends=True)))
    return config


@pytest.fixture
def two_files(tmp_path, monkeypatch):
    """~/.ssh/config and /etc/ssh/ssh_config stand-ins, no override, no cached parse."""
    user, system = tmp_path / "config", tmp_path / "ssh_config"
    user.write_text(USER_CONFIG)
    system.write_text(SYSTEM_CONFIG)
    monkeypatch.delenv(ssh_config.SSH_CONFIG_ENV, raising=False)
    monkeypatch.setattr(ssh_config, "USER_SSH_CONFIG", str(user))
    monkeypatch.setattr(ssh_config, "SYSTEM_SSH_CONFIG", str(system))
    monkeypatch.setattr(ssh_config, "_PARSED", FileCache())
    return user, system


def test_every_lookup_equals_paramiko_over_the_whole_files(two_files):
    fleet = read_ssh_config("h")
    whole = _paramiko_over_all(USER_CONFIG, SYSTEM_CONFIG)
    assert fleet.narrowing
    for alias in ALIASES:
        assert dict(fleet.lookup(alias)) == dict(whole.lookup(alias)), alias
    # the answers are what the files say, not only what Paramiko says
    # every IdentityFile in file order; the Match on the HostName a block above set applies
    home = os.path.expanduser("~/.ssh")
    assert fleet.lookup("gpu1")["identityfile"] == [
        f"{home}/first",
        f"{home}/gpu1",
        f"{home}/by-hostname",
        f"{home}/gpu1-again",
    ]
    assert (fleet.lookup("gpu1")["user"], fleet.lookup("gpu2")["user"]) == ("one", "wildcard")
    assert "proxyjump" not in fleet.lookup("gpu3") and fleet.lookup("gpu2")["port"] == "2202"


def test_the_files_exercise_every_block_a_narrowed_lookup_must_keep(two_files):
    """The control: a lookup over the alias's literal blocks alone differs from Paramiko's
    for every alias, so the equality above holds because the other blocks were kept."""
    fleet = read_ssh_config("h")
    whole = _paramiko_over_all(USER_CONFIG, SYSTEM_CONFIG)
    literal_only = [
        alias for alias in ALIASES
        if dict(ssh_config._with_blocks([fleet._blocks[i] for i in fleet._by_name.get(alias, [])])
                .lookup(alias)) != dict(whole.lookup(alias))
    ]  # fmt: skip
    assert len(literal_only) == len(ALIASES)
    # and the narrowing narrows: each file's leading options, the wildcards and the Match
    # blocks are read for every alias; the literal blocks (negations too) only for theirs
    assert len(fleet._always) == 11 and len(fleet._blocks) == 20
    assert len(fleet._by_name["gpu1"]) == 2 and "gpu6" not in fleet._by_name


def test_canonicalization_looks_up_over_every_block(tmp_path, monkeypatch):
    text = "CanonicalizeHostname yes\nCanonicalDomains invalid\nHost gpu1\n  User one\n"
    override = tmp_path / "canon"
    override.write_text(text)
    monkeypatch.setenv(ssh_config.SSH_CONFIG_ENV, str(override))
    monkeypatch.setattr(ssh_config, "_PARSED", FileCache())
    fleet = read_ssh_config("h")
    assert not fleet.narrowing
    assert dict(fleet.lookup("gpu1")) == dict(paramiko.SSHConfig.from_text(text).lookup("gpu1"))


def test_the_files_are_parsed_once_until_one_changes(two_files, monkeypatch):
    user, _ = two_files
    parses = []
    real_parse = ssh_config._parse
    monkeypatch.setattr(ssh_config, "_parse", lambda *a: parses.append(a) or real_parse(*a))
    seen: list[FleetSSHConfig] = []
    threads = [threading.Thread(target=lambda: seen.append(read_ssh_config("h")))
               for _ in range(16)]  # fmt: skip
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(parses) == 1 and all(config is seen[0] for config in seen)
    assert seen[0].lookup("gpu1") is seen[0].lookup("gpu1")  # asked once per alias
    user.write_text(USER_CONFIG.replace("User one", "User changed"))
    changed = read_ssh_config("h")
    assert changed is not seen[0] and changed.lookup("gpu1")["user"] == "changed"
    assert len(parses) == 2
    user.unlink()  # a file gone counts as absent, as before
    assert "user" not in read_ssh_config("h").lookup("gpu1")


def test_bad_files_are_one_clear_error_each_time(tmp_path, monkeypatch):
    monkeypatch.setattr(ssh_config, "_PARSED", FileCache())
    monkeypatch.setenv(ssh_config.SSH_CONFIG_ENV, str(tmp_path / "missing"))
    with pytest.raises(RouteError, match="DDTREE_DEPLOY_SSH_CONFIG=.*missing: no such file"):
        read_ssh_config("gpu1")
    bad = tmp_path / "bad"
    bad.write_bytes(b"Host gpu1\n  User \xff\n")
    monkeypatch.setenv(ssh_config.SSH_CONFIG_ENV, str(bad))
    for host in ("gpu1", "gpu2"):  # a failed parse is not kept: every host is told
        with pytest.raises(RouteError, match=f"{host}.*ssh_config {bad}"):
            read_ssh_config(host)
