"""Decorators that wire a command body to Typer: shared options, run context, bad-input exit.

A command body is `fn(run: RunContext, <its own options>)`. `host_command` gives Typer a function
whose parameters are the body's own options followed by every `SharedOptions` field, so
`push -H ct129 --json` keeps working; the root callback (`cli.app`) takes the same options before
the command name. Options given after the command name win over those given before it.
"""

from __future__ import annotations

import atexit
import dataclasses
import functools
import gc
import inspect
import typing
from collections.abc import Callable
from typing import Any, Concatenate, ParamSpec

import typer
from rich.text import Text

from ddtree_deploy.errors import ConfigError
from ddtree_deploy.fleet import ahead

from . import exit_codes
from .context import RunContext, SharedOptions, new_console

P = ParamSpec("P")
CommandBody = Callable[Concatenate[RunContext, P], None]

_SHARED_HINTS = typing.get_type_hints(SharedOptions, include_extras=True)
SHARED_PARAMETERS = tuple(
    inspect.Parameter(
        f.name, inspect.Parameter.KEYWORD_ONLY, default=f.default, annotation=_SHARED_HINTS[f.name]
    )
    for f in dataclasses.fields(SharedOptions)
)


def host_command(fn: CommandBody[P]) -> Callable[..., None]:
    """`fn` as a Typer command taking its own options and every shared option (see module)."""
    return _wire(fn, SHARED_PARAMETERS)


def local_command(fn: CommandBody[P]) -> Callable[..., None]:
    """`fn` as a Typer command with only its own options (no host is contacted)."""
    return _wire(fn, ())


def context_of(ctx: typer.Context) -> RunContext:
    """The RunContext the root callback left on `ctx.obj`, or a fresh one without it."""
    found = ctx.find_object(RunContext)
    return found if found is not None else RunContext(new_console())


@functools.cache
def skip_exit_collection() -> None:
    """Make the interpreter's exit skip its last garbage collection (once per process).

    A command that ran has Typer, Rich, pydantic and often Paramiko loaded; the collection
    CPython runs while it tears them down walks every one of their objects, ~0.1-0.2 s of a
    push's wall time. `gc.freeze()` as an atexit step moves them all out of the collector's
    sight first. Nothing the command writes depends on it: stdout/stderr are flushed by the
    interpreter, JUnit and summary files are closed when written, the journal is the host's.
    """
    atexit.register(gc.freeze)


def command_name(ctx: typer.Context) -> str:
    """The command as typed after the program's name, e.g. `push` or `patchset lock`."""
    program = ctx.find_root().command_path  # `ddtree-deploy`, or `python -m ddtree_deploy`
    return ctx.command_path.removeprefix(program).strip()


def report_refusal(run: RunContext, command: str, message: str) -> None:
    """Write the refusal to the outputs the command was asked for (--json, --junit,
    --summary-file: report/refusal.py); a file that cannot be written is said on stderr."""
    out = run.output
    if not (out.json_lines or out.junit or out.summary_file):
        return  # loads nothing more: a refused command stays fast (tests/cli/test_startup.py)
    from ddtree_deploy.report.refusal import write_refusal

    for problem in write_refusal(command, message, out.json_lines, out.junit, out.summary_file):
        run.console.print(Text.assemble(("warning:", "yellow"), f" {problem}"), soft_wrap=True)


def _given_here(ctx: typer.Context, name: str) -> bool:
    """Whether the user gave option `name` to this command (not its default).

    The enum is taken from the answer because Typer may bring its own Click.
    """
    source = ctx.get_parameter_source(name)
    return source is not None and source is not type(source).DEFAULT


def _wire(fn: CommandBody[P], shared: tuple[inspect.Parameter, ...]) -> Callable[..., None]:
    own = list(inspect.signature(fn, eval_str=True).parameters.values())[1:]  # after `run`
    names = {p.name for p in shared}
    body: Callable[..., None] = fn

    @functools.wraps(fn)
    def command(ctx: typer.Context, **values: Any) -> None:
        # `values` is what Typer parsed and converted by the parameters set below: the shared
        # options (SharedOptions' fields), then the body's own options by its own names.
        given = {name for name in names if _given_here(ctx, name)}
        options = SharedOptions(**{name: values.pop(name) for name in names})
        run = context_of(ctx).overridden(options, given)
        ctx.obj = run
        skip_exit_collection()
        try:
            run.output.check()
            body(run, **values)
        except ConfigError as exc:
            line = Text.assemble(("error:", "bold red"), f" {exc}")  # the message verbatim
            run.console.print(line, highlight=False, soft_wrap=True)
            report_refusal(run, command_name(ctx), str(exc))
            raise typer.Exit(exit_codes.BAD_INPUT) from None
        finally:
            ahead.discard()  # connections opened ahead that no rollout took (none, normally)

    context = inspect.Parameter(
        "ctx", inspect.Parameter.POSITIONAL_OR_KEYWORD, annotation=typer.Context
    )
    parameters = [context, *own, *shared]
    # Typer reads the parameters through inspect.signature, which honours __signature__; mypy
    # does not know the attribute on a function.
    command.__signature__ = inspect.Signature(parameters)  # type: ignore[attr-defined]
    command.__annotations__ = {p.name: p.annotation for p in parameters}
    return command
