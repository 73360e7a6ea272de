"""`recover`: restore hosts left `installing` by a run that died."""

from __future__ import annotations

from ddtree_deploy.pipeline import controller_holder, recover_host

from .command import host_command
from .context import RunContext
from .options import NoRestartOpt
from .rollout import run_and_exit


@host_command
def recover(run: RunContext, no_restart: NoRestartOpt = False) -> None:
    """Restore hosts left `installing` by a run that died (controller killed, link lost)."""
    hosts = run.targets.resolve()
    holder = controller_holder()
    restart = not no_restart
    run_and_exit(run, "recover", hosts, lambda r: recover_host(r, holder, restart))
