"""The `ddtree-deploy` console script and `python -m ddtree_deploy`: the CLI.

The process-wide start-up tweak lives here, in `main`, so that importing any module of the
package (a library caller, a test run) leaves the interpreter as it was.
"""

import gc
import types
import typing


def load_cli() -> types.ModuleType:
    """Import the CLI with the garbage collector paused, freeze what the import made; return
    the `ddtree_deploy.cli` module (bench/ddtree_push.py starts the same way).

    Why: start-up allocates a few hundred thousand objects (Typer, Rich, pydantic models)
    and frees almost none, so the collections they would trigger are pure cost; `gc.freeze()`
    then moves them out of the collector's sight for good (they stay in memory either way),
    so neither the first collection nor the run's later passes walk them again
    (bench/NOTES.md has the numbers).
    """
    collecting = gc.isenabled()
    gc.disable()
    try:
        import ddtree_deploy.cli as cli
    finally:
        if collecting:
            gc.freeze()
            gc.enable()
    return cli


def main() -> typing.NoReturn:
    """Run the CLI loaded by `load_cli` (cli.main, which ends the process with the command's
    exit status)."""
    run_cli: typing.Callable[[], typing.NoReturn] = load_cli().main
    run_cli()


if __name__ == "__main__":
    main()
