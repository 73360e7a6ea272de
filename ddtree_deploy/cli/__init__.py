"""Command line: Typer wiring, output and exit codes only (the work is in fleet/ and pipeline/).

Design. The options every host command shares (inventory, targets -H/-g/--all/--limit/--shard,
--parallel, output --json/--junit/--summary-file/-q/-v) are declared once, as the typed fields of
`context.SharedOptions`. `command.host_command` turns those fields into Typer parameters of the
root callback *and* of every host command, builds a frozen `RunContext` (options + the stderr
console) and puts it on `ctx.obj`; the command body gets it as its first argument and declares
only its own options. Why both places: Click only parses a root callback's options before the
command name, while every documented command line puts them after it
(`ddtree-deploy push -H ct129 -p ddtree@1.1.0 --json`); so both work, and an option given after
the command name wins over the same option given before it. No options travel as string-keyed
dicts, and there is no module-level console.

Start-up. Importing this package loads only what parsing and checking the input needs (Typer,
Rich's console, the inventory and patchset models); each command imports the pipeline, the
fleet's runner and the report inside its body, after `rollout.connect_first_hosts` has
started opening the connections of the hosts it starts first (fleet/ahead.py), so the SSH
handshakes (mostly waiting) overlap those imports (CPU); `--help` and refused input never
load them. tests/cli/test_startup.py keeps it so; bench/NOTES.md has the numbers. Importing
this package changes nothing process-wide: the collector tweak of start-up is the console
script's (`ddtree_deploy.__main__.main`), the `invoke` stand-in is `main`'s.

Modules: `app` (root and mounting), `context` (shared options, RunContext), `command` (the
decorators), `options` (options several commands take), `choice` (patchset per host),
`confirm`, `complete` (shell completion of option values), `version` (--version), `wheels`
(the pristine wheel's download, said on stderr), `rollout` (run across hosts, print, exit),
`exit_codes`, `retry` (push --retry), then one module per command or command group: push,
plan, rollback, recover, status, history, smoke, hosts, backups, patchsets.
"""

import atexit
import os
import sys
import threading
import typing

from ddtree_deploy.lazy import defer_invoke

from .app import app
from .context import Output, RunContext, SharedOptions, Targets


def main() -> typing.NoReturn:
    """Run the command line, then `leave` with its exit status.

    The console script (`ddtree_deploy.__main__.main`) imports this package and calls it.
    Before any command runs it puts the `invoke` stand-in in place (lazy.defer_invoke): a
    process-wide change made here, never when the package is imported.
    """
    defer_invoke()
    try:
        app()
    except SystemExit as exc:
        leave(exc.code)
    leave(0)


def leave(code: object) -> typing.NoReturn:
    """End the process with `code` (read as SystemExit reads it) without the interpreter's
    teardown: its atexit steps run (Paramiko joins its transport threads, logging flushes,
    `gc.freeze`), stdout and stderr are flushed, then `os._exit`.

    Why: a command that ran has Typer, Rich, pydantic and Paramiko loaded, and tearing their
    modules down is ~50-70 ms of a push's wall time that nothing needs. Every file a command
    writes is closed when written (JUnit, summary), each transport is closed when its host
    is done, and the journal and lock are the host's, finalised before the host's last
    event. When a non-daemon thread still runs (no command leaves one), this is a plain
    `sys.exit`, which waits for it.
    """
    main_thread = threading.main_thread()
    if any(t is not main_thread and not t.daemon for t in threading.enumerate()):
        raise SystemExit(code)
    if code is None:
        status = 0
    elif isinstance(code, int):
        status = code
    else:  # as Python does for sys.exit("message")
        print(code, file=sys.stderr)
        status = 1
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # closed pipe or stream: Python's exit would say 120
            status = status or 120
    os._exit(status & 0xFF)


__all__ = ["Output", "RunContext", "SharedOptions", "Targets", "app", "leave", "main"]
