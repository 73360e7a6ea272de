"""`export oci --verify`: the options, and the gate run before the artifact leaves.

The gate (pipeline/image_verify.py) loads the image just written into a real container
runtime and runs the patchset's smoke suites inside a container of it. Order of what can
go wrong: bad options and an unreachable runtime are bad input (exit 2) and are found
before anything is written; a gate that fails exits 1 and leaves nothing in --out (the
export is built in a scratch dir beside it, renamed into place only after the gate).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from ddtree_deploy.errors import ConfigError

from . import exit_codes
from .context import RunContext

if TYPE_CHECKING:
    from ddtree_deploy.events import Event, EventSink
    from ddtree_deploy.pipeline.image_verify import VerifySettings
    from ddtree_deploy.stages import PreparedPatchset

VerifyOpt = Annotated[
    bool,
    typer.Option(
        "--verify",
        help="Gate the image before it is written: load it into a container runtime and run "
        "the patchset's smoke suites inside a container of it (exit 1, nothing written, when "
        "one fails; exit 2 when no runtime answers).",
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


@dataclass(frozen=True)
class VerifyRequest:
    """The checked --verify options: the settings, and the suites' sources."""

    settings: VerifySettings
    sources: dict[str, str]


def check_verify_options(
    suites: tuple[str, ...],
    runtime: str,
    docker_host: str | None,
    python: str,
    mounts: list[str] | None,
    env: list[str] | None,
    gpus: int,
) -> VerifyRequest:
    """Return the checked request; raises ConfigError (exit 2, nothing written) for a bad
    option or a runtime that does not answer."""
    from ddtree_deploy.pipeline.image_verify import VerifySettings
    from ddtree_deploy.stages import default_smoke_dir, load_smoke_sources
    from ddtree_deploy.transport.container_runtime import (
        ContainerRuntime,
        env_pair,
        mount_spec,
        require_runtime,
    )

    if not python.startswith("/") or "\n" in python or "\x00" in python:
        raise ConfigError(f"--verify-python {python!r}: expected an absolute path in the image")
    if "server" in suites:
        raise ConfigError(
            "--verify-suite server: the server suite needs a running server in the image "
            "(not yet part of --verify)"
        )
    checked_mounts = tuple(mount_spec(m) for m in mounts or ())
    checked_env = dict(env_pair(e) for e in env or ())
    sources = load_smoke_sources(list(suites), default_smoke_dir())
    container_runtime = ContainerRuntime(runtime, docker_host)
    require_runtime(container_runtime)
    settings = VerifySettings(
        runtime=container_runtime,
        python=python,
        mounts=checked_mounts,
        env=checked_env,
        gpus=gpus,
        suites=suites,
    )
    return VerifyRequest(settings, sources)


def progress(run: RunContext) -> EventSink:
    """An event sink printing the gate's suite lines and failures for people (stderr)."""

    def sink(event: Event) -> None:
        if event.event in ("info", "fail") and event.message:
            line = f"verify {event.stage}: {event.message}"
            run.console.print(line, markup=False, highlight=False, soft_wrap=True)

    return sink


def gate_image(
    run: RunContext, prepared: PreparedPatchset, tarball: Path, tag: str, request: VerifyRequest
) -> dict[str, object]:
    """Run the gate on the image in `tarball`; return its outcome as JSON. When it fails:
    print the outcome (stdout) and the reason (stderr), and raise typer.Exit(1)."""
    from ddtree_deploy.pipeline.image_verify import verify_image

    outcome = verify_image(
        prepared, str(tarball), tag, request.settings, request.sources, progress(run)
    )
    if outcome.passed:
        return outcome.to_dict()
    summary = {"patchset": prepared.ref, "written": False, "verify": outcome.to_dict()}
    typer.echo(json.dumps(summary, sort_keys=True))
    run.console.print(
        f"error: --verify failed for {prepared.ref}: {outcome.message}; nothing written",
        markup=False,
        highlight=False,
        soft_wrap=True,
    )
    raise typer.Exit(exit_codes.ROLLED_BACK)  # 1: failed, nothing left changed
