"""`gate`: is each host's server still as good as its recorded baseline? (changes nothing)"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from ddtree_deploy.results import HostResult
from ddtree_deploy.stages import PreparedPatchset

from .choice import optional_choice, read_only_fn
from .command import host_command
from .complete import complete_patchsets
from .context import RunContext
from .options import GateModeOpt, PatchsetsDirOpt, StrictOpt, gate_mode
from .rollout import run_and_exit

if TYPE_CHECKING:
    from ddtree_deploy.pipeline import HostRun


@host_command
def gate(
    run: RunContext,
    patchset: Annotated[
        str | None,
        typer.Option(
            "--patchset",
            "-p",
            metavar="NAME[@VERSION]",
            help="Its [gate] defaults and prompts apply too.",
            autocompletion=complete_patchsets,
        ),
    ] = None,
    patchsets_dir: PatchsetsDirOpt = None,
    strict: StrictOpt = False,
    mode: GateModeOpt = None,
    baseline: Annotated[
        Path | None,
        typer.Option(
            "--baseline",
            metavar="PATH",
            help="A gate measurement (JSON), or a dir of HOST.json, to compare with instead of "
            "the one the host's last committed push saved.",
        ),
    ] = None,
    record: Annotated[
        Path | None,
        typer.Option(
            "--record",
            metavar="DIR|FILE",
            help="Also write this run's measurement to DIR/HOST.json (--url: FILE).",
        ),
    ] = None,
    url: Annotated[
        str | None,
        typer.Option(
            "--url",
            metavar="URL",
            help="Measure this server from here (no host): against --baseline FILE, or "
            "just --record FILE.",
        ),
    ] = None,
    api_key_env: Annotated[
        str | None,
        typer.Option("--api-key-env", metavar="VAR", help="--url: the server's API key variable."),
    ] = None,
) -> None:
    """Compare each host's running server with its baseline: tokens/s, accept length,
    greedy outputs, errors (and, with --gate full, load, health and metrics over the bake).
    Exit 1 when a check fails, 2 when there is no baseline to compare with, 3 when a check's
    verdict needs a human (inconclusive or no data, as the thresholds' on_inconclusive and
    on_no_data say)."""
    if url is not None:
        from .gate_url import run_url_gate

        run_url_gate(run, url, patchset, patchsets_dir, mode, baseline, record, api_key_env)
        return
    hosts = run.targets.resolve()
    choice = optional_choice(patchset, patchsets_dir, strict)
    # Loaded when the command runs, not when the CLI starts: cli/__init__.py says why.
    from ddtree_deploy.pipeline import GateOptions, gate_host

    opts = GateOptions(mode=gate_mode(mode), baseline=baseline, record=record)

    def gate_one(host_run: HostRun, prepared: PreparedPatchset | None) -> HostResult:
        return gate_host(host_run, prepared, opts)

    run_and_exit(run, "gate", hosts, read_only_fn(gate_one, choice))
