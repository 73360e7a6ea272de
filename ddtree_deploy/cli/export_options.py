"""The `--verify` options of `export oci|k8s|dir`, declared once.

Every export command takes the same gate options. They are the fields of one record,
VerifyOptions, and `with_verify_options` gives a command body that record: Typer sees each
field as an option of the command (after the body's own), the body gets them gathered.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
import typing
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

import typer

VerifyOpt = Annotated[
    bool,
    typer.Option(
        "--verify",
        help="Gate the artifact before it is written: run the patchset's smoke suites in a "
        "container (of the new image; dir/k8s: of the base with the files mounted) on a real "
        "runtime (exit 1, nothing written, when one fails; exit 2 when no runtime answers).",
    ),
]
RuntimeOpt = Annotated[
    str, typer.Option("--runtime", metavar="docker|podman", help="The container runtime's CLI.")
]
DockerHostOpt = Annotated[
    str | None,
    typer.Option(
        "--docker-host",
        metavar="URL",
        help="The runtime's endpoint (unix://SOCK, tcp://...) [default: DOCKER_HOST].",
    ),
]
VerifyPythonOpt = Annotated[
    str,
    typer.Option("--verify-python", metavar="PATH", help="The image's python (absolute)."),
]
VerifyMountOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--verify-mount",
        metavar="SRC:DST[:ro]",
        help="Bind mount into the container under test (repeat): models, a toolchain.",
    ),
]
VerifyEnvOpt = Annotated[
    list[str] | None,
    typer.Option("--verify-env", metavar="KEY=VALUE", help="Its environment (repeat)."),
]
VerifyGpusOpt = Annotated[
    int,
    typer.Option(
        "--verify-gpus", metavar="N", min=0, help="GPUs given to it (0: the gpu suite skips)."
    ),
]
VerifySuiteOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--verify-suite",
        metavar="SUITE",
        help="Suite to run inside it (repeat) [default: the patchset's smoke.suites].",
    ),
]
VerifyServeArgsOpt = Annotated[
    str | None,
    typer.Option(
        "--verify-serve-args",
        metavar="ARGS",
        help="The image's server args, one shell-quoted string (model path, --host, --port, "
        "...): the image then also serves (the patchset's [serve] flags merged in) and the "
        "server suite with its lossless gate judges it, then the serving gate compares it "
        "with the BASE image's server started with these args (--verify-gate).",
    ),
]
VerifyReadyOpt = Annotated[
    float,
    typer.Option(
        "--verify-ready-timeout", metavar="S", min=1, help="How long that server may take."
    ),
]


VerifyGateOpt = Annotated[
    str,
    typer.Option(
        "--verify-gate",
        metavar="quick|full|off",
        help="With --verify-serve-args: the serving gate of the image's server against the "
        "base image's (the push's --gate: quick replays the prompts, full adds load and "
        "bake; off skips it).",
    ),
]
VerifyGateConfigOpt = Annotated[
    Path | None,
    typer.Option(
        "--verify-gate-config",
        metavar="FILE",
        help="A TOML file with a [gate] table (as an inventory's [defaults.gate]; prompts "
        "relative to the file) over the patchset's [gate].",
    ),
]


@dataclass(frozen=True)
class VerifyOptions:
    """The --verify options of an export command, as given (export_verify.py checks them)."""

    verify: VerifyOpt = False
    runtime: RuntimeOpt = "docker"
    docker_host: DockerHostOpt = None
    verify_python: VerifyPythonOpt = "/usr/bin/python3"
    verify_mount: VerifyMountOpt = None
    verify_env: VerifyEnvOpt = None
    verify_gpus: VerifyGpusOpt = 0
    verify_suite: VerifySuiteOpt = None
    verify_serve_args: VerifyServeArgsOpt = None
    verify_ready_timeout: VerifyReadyOpt = 900.0
    verify_gate: VerifyGateOpt = "quick"
    verify_gate_config: VerifyGateConfigOpt = None


NO_VERIFY = VerifyOptions()  # a body called without the options
_HINTS = typing.get_type_hints(VerifyOptions, include_extras=True)
VERIFY_PARAMETERS = tuple(
    inspect.Parameter(
        f.name, inspect.Parameter.KEYWORD_ONLY, default=f.default, annotation=_HINTS[f.name]
    )
    for f in dataclasses.fields(VerifyOptions)
)
OPTIONS_PARAMETER = "verify"  # the body's parameter that receives the record


def with_verify_options(fn: Callable[..., None]) -> Callable[..., None]:
    """`fn(run, ..., verify: VerifyOptions)` as a body taking each option instead (its
    other parameters first), the options gathered into the record it is called with."""
    own = [
        p
        for p in inspect.signature(fn, eval_str=True).parameters.values()
        if p.name != OPTIONS_PARAMETER
    ]
    names = [p.name for p in VERIFY_PARAMETERS]
    clash = {p.name for p in own} & set(names)
    assert not clash, f"{fn.__name__}: parameters named as verify options: {clash}"

    @functools.wraps(fn)
    def body(*args: Any, **values: Any) -> None:
        options = VerifyOptions(**{name: values.pop(name) for name in names if name in values})
        fn(*args, **values, **{OPTIONS_PARAMETER: options})

    # Typer (and cli/command.py) read the parameters through inspect.signature, which
    # honours __signature__; mypy does not know the attribute on a function.
    body.__signature__ = inspect.Signature([*own, *VERIFY_PARAMETERS])  # type: ignore[attr-defined]
    return body
