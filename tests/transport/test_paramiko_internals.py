"""The Paramiko internals transport/ relies on, held to their shape so that a Paramiko
release that changes them fails here (pyproject caps paramiko below 6 for the same reason):
`Transport._send_user_message` (the keepalive's exec request, ssh.py), `SSHConfig._config`
(the parsed blocks a fleet's lookups are narrowed to, ssh_config.py), `Transport.
remote_version` (empty until the peer's banner came: the handshake wording, ssh_hops.py) and
the `paramiko` logger its transport thread writes to (silenced when a route opens)."""

from __future__ import annotations

import inspect
import logging
import socket

import paramiko

from ddtree_deploy.transport.ssh_config import _literal_names, _with_blocks


def test_send_user_message_takes_one_message():
    method = paramiko.Transport._send_user_message
    assert list(inspect.signature(method).parameters) == ["self", "data"]


def test_ssh_config_blocks_are_a_list_of_host_dicts():
    config = paramiko.SSHConfig.from_text("Host gpu1 gpu2\n  Port 2222\nHost *\n  User me\n")
    blocks = config._config
    assert isinstance(blocks, list) and all(isinstance(b, dict) for b in blocks)
    # the first block is Paramiko's implicit `Host *` for lines before any Host
    assert [_literal_names(b) for b in blocks] == [None, ["gpu1", "gpu2"], None]
    narrowed = _with_blocks(blocks[1:2])
    assert narrowed.lookup("gpu2")["port"] == "2222" and "user" not in narrowed.lookup("gpu2")


def test_remote_version_is_empty_before_a_banner():
    ours, theirs = socket.socketpair()
    try:
        transport = paramiko.Transport(ours)
        assert transport.remote_version == ""
    finally:
        ours.close()
        theirs.close()


def test_the_transport_logs_under_the_paramiko_logger():
    ours, theirs = socket.socketpair()
    try:
        transport = paramiko.Transport(ours)
        assert transport.logger.name.startswith(
            "paramiko."
        ) or transport.logger is logging.getLogger("paramiko.transport")
    finally:
        ours.close()
        theirs.close()
