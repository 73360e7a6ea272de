"""`plan`: what a push would do per file; writes nothing."""

from __future__ import annotations

from .choice import load_choice
from .command import host_command
from .context import RunContext
from .options import PatchsetOpt, PatchsetsDirOpt, StrictOpt
from .rollout import run_and_exit


@host_command
def plan(
    run: RunContext,
    patchset: PatchsetOpt = "ddtree",
    patchsets_dir: PatchsetsDirOpt = None,
    strict: StrictOpt = False,
) -> None:
    """Show what a push would do per file (new/patched/unchanged/drifted); writes nothing."""
    hosts = run.targets.resolve()
    choice = load_choice(patchset, patchsets_dir, strict)
    # Loaded when the command runs, not when the CLI starts: cli/__init__.py says why.
    from ddtree_deploy.pipeline import per_host, plan_host
    from ddtree_deploy.report import plan_table

    run_and_exit(
        run,
        f"plan {choice.label}",
        hosts,
        per_host(choice, plan_host),
        table=plan_table,
        result_on_stdout=True,
    )
