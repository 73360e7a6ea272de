"""`export oci --verify`: the options, and the gate run before the artifact leaves.

The gate (pipeline/image_verify.py) loads the image just written into a real container
runtime and runs the patchset's smoke suites inside a container of it. Order of what can
go wrong: bad options and an unreachable runtime are bad input (exit 2) and are found
before anything is written; a gate that fails exits 1 and leaves nothing in --out (the
export is built in a scratch dir beside it, renamed into place only after the gate).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from ddtree_deploy.errors import ConfigError

from . import exit_codes
from .context import RunContext
from .export_gate import verify_gate_settings

if TYPE_CHECKING:
    from ddtree_deploy.events import Event, EventSink
    from ddtree_deploy.gate.settings import GateSettings
    from ddtree_deploy.pipeline.image_gate import BaseImage
    from ddtree_deploy.pipeline.image_serve import ServeCheck
    from ddtree_deploy.pipeline.image_verify import VerifySettings
    from ddtree_deploy.stages import PreparedPatchset

    from .export_options import VerifyOptions


@dataclass(frozen=True)
class VerifyRequest:
    """The checked --verify options: the settings, and the suites' sources."""

    settings: VerifySettings
    sources: dict[str, str]


def verify_request(prepared: PreparedPatchset, options: VerifyOptions) -> VerifyRequest | None:
    """The checked gate of an export command, None without --verify. Raises ConfigError
    (exit 2, nothing written) for a bad option, a --verify-* option without --verify, or
    a runtime that does not answer."""
    given = {
        "--docker-host": options.docker_host,
        "--verify-mount": options.verify_mount,
        "--verify-env": options.verify_env,
        "--verify-suite": options.verify_suite,
        "--verify-serve-args": options.verify_serve_args,
        "--verify-gate-config": options.verify_gate_config,
    }
    if not options.verify:
        if stray := [k for k, v in given.items() if v]:
            raise ConfigError(f"{', '.join(stray)}: only with --verify")
        return None
    names = tuple(options.verify_suite) if options.verify_suite else prepared.suites
    serve = serve_check(prepared, options.verify_serve_args, options.verify_ready_timeout)
    gate = verify_gate_settings(
        prepared, options.verify_gate, options.verify_gate_config, serve is not None
    )
    return check_verify_options(
        names,
        options.runtime,
        options.docker_host,
        options.verify_python,
        options.verify_mount,
        options.verify_env,
        options.verify_gpus,
        serve,
        gate,
    )


def serve_check(
    prepared: PreparedPatchset, serve_args: str | None, ready_timeout_s: float
) -> ServeCheck | None:
    """The server the image starts: the given args with the patchset's [serve] flags merged
    over them (as a push's serve file), None without args. Raises ConfigError."""
    import shlex

    from ddtree_deploy.export.k8s import merge_args
    from ddtree_deploy.pipeline.image_serve import ServeCheck

    if serve_args is None:
        return None
    try:
        given = shlex.split(serve_args)
    except ValueError as exc:
        raise ConfigError(f"--verify-serve-args: {exc}") from None
    if not given:
        raise ConfigError("--verify-serve-args: give the server's args (at least --model-path)")
    serve = list(prepared.serve.args) if prepared.serve else []
    return ServeCheck(tuple(merge_args(given, serve)), ready_timeout_s, tuple(given))


def shipped_order(suites: tuple[str, ...]) -> list[str]:
    """The suites in the order the container runs them: `compile` last. It py_compiles
    every patched file, writing fresh bytecode where the image's python reads it (the
    image's own __pycache__ in a container's writable layer): run first, it would hide a
    stale .pyc the image ships from the suites after it, which must see the image as
    shipped (measured: a mount variant without its bytecode prefix passed that way)."""
    return sorted(suites, key=lambda name: name == "compile")


def check_verify_options(
    suites: tuple[str, ...],
    runtime: str,
    docker_host: str | None,
    python: str,
    mounts: list[str] | None,
    env: list[str] | None,
    gpus: int,
    serve: ServeCheck | None = None,
    gate: GateSettings | None = None,
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
    if "server" in suites and serve is None:
        raise ConfigError(
            "--verify-suite server: the server suite needs the image's server: give "
            "--verify-serve-args"
        )
    if serve is not None and "server" not in suites:
        suites = (*suites, "server")
    if not suites:  # a gate that checks nothing must not pass
        raise ConfigError(
            "--verify: the patchset names no smoke suites (smoke.suites) and no --verify-suite "
            "or --verify-serve-args was given: nothing would be checked"
        )
    checked_mounts = tuple(mount_spec(m) for m in mounts or ())
    checked_env = dict(env_pair(e) for e in env or ())
    sources = load_smoke_sources(shipped_order(suites), default_smoke_dir())
    container_runtime = ContainerRuntime(runtime, docker_host)
    require_runtime(container_runtime)
    settings = VerifySettings(
        runtime=container_runtime,
        python=python,
        mounts=checked_mounts,
        env=checked_env,
        gpus=gpus,
        serve=serve,
        gate=gate,
    )
    return VerifyRequest(settings, sources)


MEASURED = ("baseline", "canary")  # stages whose ok line is a measurement people read


def progress(run: RunContext) -> EventSink:
    """An event sink printing the gate's suite lines and failures for people (stderr), and
    the serving gate's measurements (the base's and the image's)."""

    def sink(event: Event) -> None:
        measured = event.event == "ok" and event.stage in MEASURED
        if (event.event in ("info", "fail") or measured) and event.message:
            line = f"verify {event.stage}: {event.message}"
            run.console.print(line, markup=False, highlight=False, soft_wrap=True)

    return sink


def gate_image(
    run: RunContext,
    prepared: PreparedPatchset,
    tarball: Path,
    tag: str,
    request: VerifyRequest,
    base: BaseImage | None = None,
) -> dict[str, object]:
    """Run the gate on the image in `tarball` (the serving gate against `base`'s server
    when it runs); return its outcome as JSON. When it fails: print the outcome (stdout)
    and the reason (stderr), and raise typer.Exit(1)."""
    from ddtree_deploy.pipeline.image_verify import verify_image

    outcome = verify_image(
        prepared, str(tarball), tag, request.settings, request.sources, progress(run), base
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


def compares_base(request: VerifyRequest) -> bool:
    """Whether the gate runs the base image's server too (the serving gate's baseline)."""
    return request.settings.serve is not None and request.settings.gate is not None


@contextmanager
def loadable_base(base: Path, out: Path) -> Iterator[tuple[Path, str]]:
    """Yield the base image written as a loadable tarball (in a temp dir beside `out`,
    removed after) and the fresh tag it loads as."""
    import secrets
    import tempfile

    from ddtree_deploy.export.base_tarball import write_base_tarball

    tag = f"ddtree-verify-base:{secrets.token_hex(4)}"
    with tempfile.TemporaryDirectory(prefix=f".{out.name}.verify-", dir=out.parent) as tmp:
        tarball = Path(tmp) / "base.tar"
        write_base_tarball(base, tarball, tag)
        yield tarball, tag


def gate_oci(
    run: RunContext,
    prepared: PreparedPatchset,
    tarball: Path,
    tag: str,
    request: VerifyRequest,
    base: Path,
    out: Path,
) -> dict[str, object]:
    """gate_image on the exported image; with a server and a serving gate, the `base`
    image (written loadable beside `out`) runs the baseline, as the operator runs it."""
    from ddtree_deploy.pipeline.image_gate import BaseImage

    if not compares_base(request):
        return gate_image(run, prepared, tarball, tag, request)
    settings = request.settings
    with loadable_base(base, out) as (base_tarball, base_tag):
        against = BaseImage(str(base_tarball), base_tag, settings.mounts, settings.env)
        return gate_image(run, prepared, tarball, tag, request, against)


def gate_mounts(
    run: RunContext,
    prepared: PreparedPatchset,
    base: Path,
    pairs: list[tuple[str, str]],
    out: Path,
    request: VerifyRequest,
) -> dict[str, object]:
    """Gate the mount variants (`export dir`, the ConfigMap and image-volume variants of
    `export k8s`): a container of the BASE image with each (source, in-image path) of
    `pairs` mounted read-only over it and PYTHONPYCACHEPREFIX set, as those variants run
    it. The base is written as a loadable tarball in a temp dir beside `out` (removed
    after). The serving gate's baseline is the same base without those mounts. Returns
    the outcome as JSON; raises typer.Exit(1) as gate_image does."""
    import dataclasses

    from ddtree_deploy.export.files import PYCACHE_DIR, PYCACHE_ENV
    from ddtree_deploy.pipeline.image_gate import BaseImage

    settings = request.settings
    mounts = (*settings.mounts, *(f"{src}:{dst}:ro" for src, dst in pairs))
    env = {**settings.env, PYCACHE_ENV: PYCACHE_DIR}
    mounted = VerifyRequest(dataclasses.replace(settings, mounts=mounts, env=env), request.sources)
    with loadable_base(base, out) as (tarball, tag):
        against = BaseImage(str(tarball), tag, settings.mounts, settings.env)
        unmounted = against if compares_base(request) else None
        return gate_image(run, prepared, tarball, tag, mounted, unmounted)
