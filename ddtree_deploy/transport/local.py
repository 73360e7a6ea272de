"""Run the agent on this machine with a subprocess (hosts with transport = "local")."""

from __future__ import annotations

import subprocess
from collections.abc import Mapping

from ddtree_deploy.agent import packed_agent
from ddtree_deploy.errors import ConnectError, ContainerError, TransportError
from ddtree_deploy.inventory import Host
from ddtree_deploy.transport.base import Transport
from ddtree_deploy.transport.become import sudo_missing
from ddtree_deploy.transport.launch import agent_argv


class LocalTransport(Transport):
    """Same protocol as SSH, no network: argv without a shell, one process per request.

    env: the agent's environment (default: this process's); `export --verify` gives the
    container runtime's endpoint to the agent that relays into the container.
    """

    def __init__(self, host: Host, env: Mapping[str, str] | None = None):
        super().__init__(host)
        self.env = dict(env) if env is not None else None

    def _exec_agent(self, payload: bytes) -> tuple[str, str, int]:
        self.stats.sessions += 1
        argv = agent_argv(self.host)
        try:
            done = subprocess.run(
                argv,
                input=packed_agent() + payload,
                capture_output=True,
                timeout=3600,
                env=self.env,
            )
        except OSError as exc:  # never started: nothing ran (a container host's: bad config)
            if self.host.become and isinstance(exc, FileNotFoundError) and exc.filename == "sudo":
                raise sudo_missing(self.host) from None
            error = ContainerError if self.host.container else ConnectError
            raise error(self.host.name, f"cannot run {argv[0]}: {exc}") from None
        except subprocess.TimeoutExpired as exc:  # it ran, and may have done part of its work
            raise TransportError(self.host.name, f"cannot run {self.host.python}: {exc}") from None
        return (
            done.stdout.decode(errors="replace"),
            done.stderr.decode(errors="replace"),
            (done.returncode),
        )
