"""The `ddtree-deploy` console script and `python -m ddtree_deploy`: the CLI.

The process-wide start-up tweak lives here, in `main`, so that importing any module of the
package (a library caller, a test run) leaves the interpreter as it was.
"""

import gc
import typing


def main() -> typing.NoReturn:
    """Import the CLI with the garbage collector paused, freeze what the import made, then
    run it (cli.main, which ends the process with the command's exit status).

    Why: start-up allocates a few hundred thousand objects (Typer, Rich, pydantic models)
    and frees almost none, so the collections they would trigger are pure cost; `gc.freeze()`
    then moves them out of the collector's sight for good (they stay in memory either way),
    so neither the first collection nor the run's later passes walk them again
    (bench/NOTES.md has the numbers).
    """
    collecting = gc.isenabled()
    gc.disable()
    try:
        from ddtree_deploy.cli import main as run_cli
    finally:
        if collecting:
            gc.freeze()
            gc.enable()
    run_cli()


if __name__ == "__main__":
    main()
