"""Our small exception tree; lower libraries' errors are translated into it at the edges.

DeployError
├── ConfigError          bad input: inventory, patchset, CLI option (exit 2, nothing changed)
│   ├── InventoryError
│   └── PatchsetError
└── TransportError       cannot talk to a host
    ├── ConnectError     the host was never reached: nothing ran there
    │   ├── HostKeyError unknown or changed host key (on any hop of the route)
    │   ├── RouteError   ssh_config or a jump chain names no usable route (refused)
    │   ├── BecomeError  sudo refused to start the agent (password, denied, no sudo)
    │   ├── ContainerError the container's agent could not start (bad container config)
    │   └── PythonError  the inventory's `python` cannot be run on the host (not found)
    └── AgentError       the remote agent answered something we cannot read
"""

__all__ = [
    "AgentError",
    "BecomeError",
    "ConfigError",
    "ContainerError",
    "DeployError",
    "HostKeyError",
    "InventoryError",
    "PatchsetError",
    "PythonError",
    "RouteError",
    "TransportError",
]


class DeployError(Exception):
    """Base of every error ddtree-deploy raises on purpose."""


class ConfigError(DeployError):
    """Bad input; raised before any remote I/O."""


class InventoryError(ConfigError):
    """An inventory file is missing, malformed or names unknown hosts/groups."""


class PatchsetError(ConfigError):
    """A patchset is malformed, does not apply, or disagrees with its lock."""


class TransportError(DeployError):
    """A host could not be reached or the connection broke."""

    def __init__(self, host: str, message: str):
        super().__init__(f"{host}: {message}")
        self.host = host


class ConnectError(TransportError):
    """The connection could not be opened, so no agent ran on the host for this request.

    Any other TransportError came after the host was reached: the agent may have done
    (part of) its work, e.g. taken the host lock.
    """


class HostKeyError(ConnectError):
    """The host's key is unknown or differs from known_hosts; we never add keys silently."""


class RouteError(ConnectError):
    """The route to the host cannot be built: a bad ssh_config value or ProxyJump, a jump
    chain that loops; refused before any connection, like bad inventory input."""


class ContainerError(ConnectError):
    """The agent could not be started in the host's container: no runtime on the host, no
    such container, not running, or no such python inside it. Nothing ran: bad input."""


class PythonError(ConnectError):
    """The host's shell could not run the inventory's `python` (exit 126/127: no such file,
    not executable), so nothing ran there: a config error (exit 2), not a broken host."""


class AgentError(TransportError):
    """The remote agent's answer was missing or unreadable."""


class BecomeError(ConnectError):
    """`sudo -n` refused to start the agent, so nothing ran on the host (exit 2).

    `kind` is what `hosts check` shows: "password required" (the rule wants a password,
    which a non-interactive run never types), "denied" (no rule lets the login user run the
    host's python as `become_user`), "unknown user" or "no sudo" (sudo is not installed).
    The message quotes sudo's (or the shell's) own line.
    """

    def __init__(self, host: str, kind: str, message: str):
        super().__init__(host, message)
        self.kind = kind
