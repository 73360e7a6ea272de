"""Why `sudo -n` refused to start the agent, read from what it left on stderr.

With `become = "sudo"` the agent runs as ``sudo -n -u USER -- PYTHON -c ...`` (launch.py).
sudo decides before the agent starts: when it refuses, no agent answers and stderr holds
sudo's own line (or the login shell's, when there is no sudo). `-n` makes a rule that wants
a password fail at once instead of waiting for a prompt nobody answers. Pure: the
transports call it with what the process left.

sudo asks for a password before it tells a user a command is not allowed, so with `-n` a
user no rule covers also reads "a password is required", unless the sudoers policy says
`!authenticate`; sudo's own line is quoted either way.
"""

from __future__ import annotations

from ddtree_deploy.agent.host.wire import BEGIN
from ddtree_deploy.errors import BecomeError
from ddtree_deploy.inventory import Host

PASSWORD_REQUIRED = "password required"
DENIED = "denied"
UNKNOWN_USER = "unknown user"
NO_SUDO = "no sudo"
OK = "ok"

# (kind, lines that say it): sudo 1.8/1.9 messages, and dash/bash/zsh for a missing sudo.
_SIGNS: tuple[tuple[str, tuple[str, ...]], ...] = (
    (PASSWORD_REQUIRED, ("sudo: a password is required", "sudo: a terminal is required")),
    (PASSWORD_REQUIRED, ("you must have a tty to run sudo",)),
    (DENIED, ("is not allowed to execute", "is not in the sudoers file", "may not run sudo")),
    (UNKNOWN_USER, ("sudo: unknown user",)),
    (NO_SUDO, ("sudo: not found", "sudo: command not found", "command not found: sudo")),
)
_LINE_MAX_CHARS = 160  # a denial quotes the whole command line (the agent's bootstrap)


def _hint(host: Host, kind: str) -> str:
    login = host.user or "the login user"
    return {
        PASSWORD_REQUIRED: f"the sudoers rule wants a password and ddtree-deploy never types "
        f"one (sudo -n): give {login} a NOPASSWD rule for {host.python}",
        DENIED: f"no sudoers rule lets {login} run {host.python} as {host.become_user}",
        UNKNOWN_USER: f"become_user {host.become_user!r} does not exist on the host",
        NO_SUDO: 'become = "sudo" but sudo is not installed on the host (or not on the login PATH)',
    }[kind]


def _shorten(line: str) -> str:
    line = line.strip()
    return line if len(line) <= _LINE_MAX_CHARS else line[: _LINE_MAX_CHARS - 1] + "…"


def become_refusal(host: Host, stdout: str, stderr: str) -> BecomeError | None:
    """Return the BecomeError naming the host, the kind and sudo's line when sudo refused to
    start the agent; None when the agent answered or the failure was not sudo's."""
    if not host.become or BEGIN in stdout:
        return None
    for line in stderr.splitlines():
        for kind, signs in _SIGNS:
            if any(sign in line for sign in signs):
                message = f"become: {kind}: {_shorten(line)!r}: {_hint(host, kind)}"
                return BecomeError(host.name, kind, message)
    return None


def sudo_missing(host: Host) -> BecomeError:
    """The error for a host (local transport) where `sudo` could not be executed at all."""
    return BecomeError(host.name, NO_SUDO, f"become: {NO_SUDO}: {_hint(host, NO_SUDO)}")
