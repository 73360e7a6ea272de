"""`gate --url URL`: the gate against any reachable server, from this machine (no host)."""

from __future__ import annotations

import json
from pathlib import Path

import typer

from ddtree_deploy.errors import ConfigError
from ddtree_deploy.gate.settings import GateMode
from ddtree_deploy.patchset import default_patchsets_dir, resolve_patchset
from ddtree_deploy.stages import prepare_patchset

from . import exit_codes
from .context import RunContext
from .options import GateChoice, gate_mode


def run_url_gate(
    run: RunContext,
    url: str,
    patchset: str | None,
    patchsets_dir: Path | None,
    mode: GateChoice | None,
    baseline: Path | None,
    record: Path | None,
    api_key_env: str | None,
) -> None:
    """Measure `url`, compare with `baseline` (none: measure and --record only), print the
    verdict (JSON on stdout) and exit 0 (as good), 1 (a check failed, or the server gave no
    usable measurement), 2 (bad input: no/unusable baseline, bad URL) or 3 (a check's verdict
    needs a human: inconclusive, or no data, as the thresholds say)."""
    from ddtree_deploy.pipeline.gate_url import gate_url

    if baseline is not None and not baseline.is_file():
        raise ConfigError(f"gate --url: --baseline {baseline}: no such file")
    if not url.startswith(("http://", "https://")):
        raise ConfigError(f"gate --url {url!r}: expected http://HOST:PORT or https://...")
    prepared = None
    if patchset:
        found = resolve_patchset(patchsets_dir or default_patchsets_dir(), patchset)
        prepared = prepare_patchset(found)
    chosen: GateMode | None = gate_mode(mode)
    result = gate_url(url, prepared, chosen, baseline, record, api_key_env)
    typer.echo(
        json.dumps(
            {
                "ok": result.ok,
                "needs_human": result.needs_human,
                "message": result.message,
                **result.details,
            }
        )
    )
    run.console.print(result.message, markup=False, highlight=False, soft_wrap=True)
    if result.refused:
        raise typer.Exit(exit_codes.BAD_INPUT)
    if result.needs_human:
        raise typer.Exit(exit_codes.NEEDS_ATTENTION)
    if not result.ok:
        raise typer.Exit(exit_codes.ROLLED_BACK)
