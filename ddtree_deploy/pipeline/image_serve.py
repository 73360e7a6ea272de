"""`export --verify` with a server: the image's own sglang serves, the `server` suite and
its lossless gate judge it.

A container of the image runs `PYTHON -m sglang.launch_server ARGS` (the image's server
args given by the operator, the patchset's [serve] flags merged over them, as a push's
serve file would), on the host's network. Readiness is the push's own health op (the agent
in the container polls the server's health URL until it answers, or the ready timeout),
then the `server` suite runs in mode "verify": the algorithm and budget the server reports,
generation, the acceptance floor, and, for a patchset with [lossless], greedy output equal
to the target's token for token against the patchset's shipped references (matched by the
served model's fingerprint and dtype). A gate that needs a reference and has none fails.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ddtree_deploy.events import Stage
from ddtree_deploy.inventory.models import SmokeSpec
from ddtree_deploy.inventory.service import ServiceSpec
from ddtree_deploy.pipeline.context import HostRun
from ddtree_deploy.pipeline.smoke import smoke_host
from ddtree_deploy.results import HostResult, Outcome
from ddtree_deploy.stages import PreparedPatchset
from ddtree_deploy.stages import op_builders as ops

LAUNCH = ("-m", "sglang.launch_server")
DEFAULT_HOST, DEFAULT_PORT = "127.0.0.1", "30000"  # sglang's defaults
ANY_ADDRESS = ("0.0.0.0", "::", "[::]")


@dataclass(frozen=True)
class ServeCheck:
    """The server to start from the image: its full args (the patchset's [serve] merged
    in), how long it may take to answer health, and the args as the operator gave them
    (the base image's server, the serving gate's baseline: image_gate.py)."""

    args: tuple[str, ...]
    ready_timeout_s: float = 900.0
    base_args: tuple[str, ...] = ()

    def of_base(self) -> ServeCheck:
        """The base image's server: the operator's args, without the patchset's flags."""
        return ServeCheck(self.base_args, self.ready_timeout_s)

    @property
    def url(self) -> str:
        """http://HOST:PORT from the args' --host/--port (sglang's defaults when absent);
        a server bound to every address is asked on 127.0.0.1."""
        host, port = flag_value(self.args, "--host"), flag_value(self.args, "--port")
        host = host or DEFAULT_HOST
        host = DEFAULT_HOST if host in ANY_ADDRESS else host
        host = f"[{host}]" if ":" in host else host
        return f"http://{host}:{port or DEFAULT_PORT}"

    def smoke_spec(self) -> SmokeSpec:
        """The `server` suite's settings: this URL, and the algorithm and budget the args
        ask for (the suite checks the server reports them)."""
        algorithm = flag_value(self.args, "--speculative-algorithm")
        budget = flag_value(self.args, "--speculative-ddtree-budget")
        return SmokeSpec(
            server_url=self.url,
            expected_algorithm=algorithm,
            expected_ddtree_budget=int(budget) if budget and budget.isdigit() else None,
            timeout_s=300.0,
        )

    def service(self) -> ServiceSpec:
        """The container as the service whose health the push's health op waits for."""
        return ServiceSpec(
            kind="container",
            health_url=f"{self.url}/health_generate",
            ready_timeout_s=self.ready_timeout_s,
        )


def flag_value(args: Sequence[str], flag: str) -> str | None:
    """The value of the last `flag VALUE` or `flag=VALUE` in args, None when absent."""
    found = None
    for i, token in enumerate(args):
        if token == flag and i + 1 < len(args):
            found = args[i + 1]
        elif token.startswith(flag + "="):
            found = token.split("=", 1)[1]
    return found


def serve_and_judge(
    run: HostRun, prepared: PreparedPatchset, sources: dict[str, str]
) -> tuple[bool, str, list[dict[str, Any]]]:
    """Wait for the server in the container of `run.host` (its health), then run the
    `server` suite of `sources`; return (passed, message, suite results)."""
    unhealthy = wait_healthy(run)
    if unhealthy is not None:
        return False, unhealthy, []
    result = smoke_host(run, prepared, sources)
    suites = list(result.details.get("suites") or [])
    return result.outcome == Outcome.OK, result.message, suites


def wait_healthy(run: HostRun) -> str | None:
    """Wait (the push's health op) for the server in the container of `run.host`; None
    once it answers, else why not."""
    health = [(stage, op) for stage, op in ops.service_ops(run.host) if stage == Stage.HEALTH]
    response = run.ask(health)
    if isinstance(response, HostResult):
        return f"the server did not start: {response.message}"
    failed = response.failed
    if failed is not None or not response.results:
        why = (failed.error if failed else response.error) or "no answer"
        return f"the server did not become healthy: {why}"
    return None
