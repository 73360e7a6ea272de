"""Command line: Typer wiring, output and exit codes only (the work is in fleet/ and pipeline/).

Design. The options every host command shares (inventory, targets -H/-g/--all/--limit/--shard,
--parallel, output --json/--junit/--summary-file/-v) are declared once, as the typed fields of
`context.SharedOptions`. `command.host_command` turns those fields into Typer parameters of the
root callback *and* of every host command, builds a frozen `RunContext` (options + the stderr
console) and puts it on `ctx.obj`; the command body gets it as its first argument and declares
only its own options. Why both places: Click only parses a root callback's options before the
command name, while every documented command line puts them after it
(`ddtree-deploy push -H ct129 -p ddtree@1.1.0 --json`); so both work, and an option given after
the command name wins over the same option given before it. No options travel as string-keyed
dicts, and there is no module-level console.

Modules: `app` (root and mounting), `context` (shared options, RunContext), `command` (the
decorators), `options` (options several commands take), `choice` (patchset per host),
`confirm`, `rollout` (run across hosts, print, exit), `exit_codes`, then one module per command
or command group: push, plan, rollback, recover, status, smoke, hosts, backups, patchsets.
"""

import gc

# Start-up allocates a few hundred thousand objects (Typer, Rich, pydantic models) and frees
# almost none: the collections they would trigger are pure cost (~10-20% of the imports).
_collecting = gc.isenabled()
gc.disable()
try:
    from .app import app
    from .context import Output, RunContext, SharedOptions, Targets
finally:
    if _collecting:
        gc.enable()


def main() -> None:
    """Run the command line (the `ddtree-deploy` console script)."""
    app()


__all__ = ["Output", "RunContext", "SharedOptions", "Targets", "app", "main"]
