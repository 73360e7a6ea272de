"""sudo's refusal read from what the agent process left, and the agent argv under become.

Pure: the stderr lines are the ones sudo 1.9 (Debian 12) and the shells print; the host
tests (tests/targets/test_become_hosts.py) prove the same on a real sshd with real sudo.
"""

from __future__ import annotations

import pytest

from ddtree_deploy.agent.host.wire import BEGIN, END
from ddtree_deploy.errors import BecomeError, ConnectError
from ddtree_deploy.inventory import parse_inventory
from ddtree_deploy.transport.become import become_refusal
from ddtree_deploy.transport.launch import agent_argv

BOOTSTRAP_LINE = "# ddtree-agent"


def host(**keys):
    raw = {"hosts": {"gpu7": {"address": "10.0.0.7", "user": "deploy", **keys}}}
    return parse_inventory(raw, "mem").hosts["gpu7"]


SUDO = host(become="sudo", python="/opt/venv/bin/python")

CASES = [
    ("sudo: a password is required\n", "password required"),
    (
        "Sorry, user deploy is not allowed to execute '/opt/venv/bin/python -c "
        + BOOTSTRAP_LINE
        + "\nimport sys' as root on gpu7.\n",
        "denied",
    ),
    ("deploy is not in the sudoers file.\n", "denied"),
    ("Sorry, user deploy may not run sudo on gpu7.\n", "denied"),
    (
        "sudo: unknown user svc\nsudo: error initializing audit plugin sudoers_audit\n",
        "unknown user",
    ),
    ("sh: 1: sudo: not found\n", "no sudo"),
    ("bash: line 1: sudo: command not found\n", "no sudo"),
    (
        "Could not chdir to home directory /nonexistent\nsudo: a password is required",
        "password required",
    ),
]


@pytest.mark.parametrize(("stderr", "kind"), CASES)
def test_sudo_lines_become_a_refusal_naming_host_and_kind(stderr, kind):
    refused = become_refusal(SUDO, "", stderr)
    assert isinstance(refused, BecomeError) and isinstance(refused, ConnectError)
    assert refused.kind == kind
    text = str(refused)
    assert text.startswith("gpu7: become: " + kind)
    assert "\n" not in text and len(text) < 400  # one line, even for a quoted bootstrap


def test_no_refusal_without_become_or_when_the_agent_answered():
    plain = host()
    assert become_refusal(plain, "", "sudo: a password is required\n") is None
    answered = f"{BEGIN}\n{{}}\n{END}\n"
    assert become_refusal(SUDO, answered, "sudo: a password is required\n") is None
    assert become_refusal(SUDO, "", "Traceback (most recent call last):\n") is None


def test_agent_argv_runs_python_through_noninteractive_sudo():
    argv = agent_argv(host(become="sudo", become_user="svc", python="/opt/venv/bin/python"))
    assert argv[:6] == ["sudo", "-n", "-u", "svc", "--", "/opt/venv/bin/python"]
    assert agent_argv(host(python="/opt/venv/bin/python"))[0] == "/opt/venv/bin/python"
