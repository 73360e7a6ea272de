"""`export --verify`: the exported image loaded into a real container runtime and gated.

The image is loaded (`docker load`), one container of it is started idle on the host's
network, and the patchset's smoke suites run INSIDE it through the same agent and smoke op
a push uses on a container host (transport/launch.py: the local agent relays each request
with `RUNTIME exec -i NAME PYTHON`): the package as the image's python imports it, its
files against the lock, its bytecode, its imports, the DDTree checks. Nothing here judges
the image by reading its tarball: that is the export's own code, and the point is an
independent reader. The container and (unless it was there before) the loaded image are
removed afterwards; a tag the load moved off another image is put back on it.
"""

from __future__ import annotations

import secrets
import sys
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from typing import Any

from ddtree_deploy.events import EventSink, HostRecorder
from ddtree_deploy.gate.settings import GateSettings
from ddtree_deploy.inventory import Host
from ddtree_deploy.inventory.models import SmokeSpec
from ddtree_deploy.inventory.service import ServiceSpec
from ddtree_deploy.pipeline.context import HostRun, new_run_id
from ddtree_deploy.pipeline.image_gate import BaseImage, judge_image, measure_baseline
from ddtree_deploy.pipeline.image_serve import LAUNCH, ServeCheck, serve_and_judge
from ddtree_deploy.pipeline.push_gate import PushGate
from ddtree_deploy.pipeline.smoke import smoke_host
from ddtree_deploy.results import GateDetails, Outcome
from ddtree_deploy.stages import PreparedPatchset
from ddtree_deploy.transport.container_runtime import (
    ContainerRuntime,
    ContainerSpec,
    RuntimeCallError,
    container_logs,
    container_state,
    image_id,
    load_image,
    remove_container,
    remove_image,
    start_container,
    tag_image,
)
from ddtree_deploy.transport.local import LocalTransport

HOST_NAME = "image"  # how events name the container under test
STATE_DIR = "/tmp/ddtree-deploy-verify"  # inside the container: writable by any user
IDLE = "import signal\nsignal.pause()"  # the container's main process while suites run
SHM_SIZE = "16g"  # /dev/shm limit of the containers (sglang shares tensors there)


@dataclass(frozen=True)
class VerifySettings:
    """How to run the image: its python, what to mount and set, the GPUs, the server.

    python: the image's interpreter (absolute). mounts: `SRC:DST[:ro]` bind mounts
    (models, a host toolchain). env: variables of the container. gpus: the GPUs the image
    is given (`--gpus N`); 0 makes the gpu suite skip. serve: the server the image starts
    once the other suites passed. gate: the serving gate of that server against the base
    image's (image_gate.py), None for none.
    """

    runtime: ContainerRuntime
    python: str = "/usr/bin/python3"
    mounts: tuple[str, ...] = ()
    env: Mapping[str, str] = field(default_factory=dict)
    gpus: int = 0
    serve: ServeCheck | None = None  # with it, a server from the image and the server suite
    gate: GateSettings | None = None  # with serve and a base: the image's server vs the base's


@dataclass(frozen=True)
class VerifyOutcome:
    """What the gate found: passed or not, why, every suite's result line, and the
    serving gate's baseline line and checks (None when it did not run)."""

    passed: bool
    message: str
    image: str = ""
    image_id: str = ""
    suites: tuple[dict[str, Any], ...] = ()
    gate: GateDetails | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "passed": self.passed,
            "message": self.message,
            "image": self.image,
            "image_id": self.image_id,
            "suites": [
                {k: s.get(k) for k in ("suite", "passed", "skipped", "duration_s")}
                for s in self.suites
            ],
            "gate": self.gate,
        }


def verify_image(
    prepared: PreparedPatchset,
    tarball: str,
    tag: str,
    settings: VerifySettings,
    sources: dict[str, str],
    sink: EventSink,
    base: BaseImage | None = None,
) -> VerifyOutcome:
    """Load `tarball` (its image tagged `tag`) into the runtime, run the `sources` suites
    inside a container of it, clean up; return the outcome (never raises for a failed
    gate or a failed runtime call). With a server, settings.gate and `base`, the serving
    gate compares the image's server with the base image's (image_gate.py).

    The runtime must already have answered (require_runtime): a missing runtime is bad
    input, not a failed gate.
    """
    runtime = settings.runtime
    idle = ContainerSpec(
        image="",
        name="",
        entrypoint=settings.python,
        args=("-c", IDLE),
        mounts=settings.mounts,
        env=settings.env,
        gpus=settings.gpus,
        shm_size=SHM_SIZE,
    )
    try:
        with loaded_image(runtime, tarball, tag) as (reference, loaded_id):
            spec = replace(idle, image=loaded_id, name=container_name())
            with running_container(runtime, spec):
                done = _run_suites(prepared, settings, spec.name, sources, sink)
            baseline = None
            if done.passed and settings.serve and settings.gate and base is not None:
                baseline, why = _measure_base(settings, idle, base, sink)
                done = done if baseline is not None else _SuitesDone(False, why, done.suites)
            if done.passed and settings.serve is not None:
                serving = replace(spec, name=container_name(), args=(*LAUNCH, *settings.serve.args))
                with running_container(runtime, serving):
                    served = _run_server(prepared, settings, serving.name, sources, sink, baseline)
                done = _SuitesDone(
                    served.passed, served.message, done.suites + served.suites, served.gate
                )
    except RuntimeCallError as exc:
        return VerifyOutcome(False, f"the image could not be run: {exc}")
    suites = tuple(done.suites)
    return VerifyOutcome(done.passed, done.message, reference, loaded_id, suites, done.gate)


def _measure_base(
    settings: VerifySettings, idle: ContainerSpec, base: BaseImage, sink: EventSink
) -> tuple[PushGate | None, str]:
    """Load and start the base image's server as the operator runs it and measure it (the
    gate's baseline); it is removed afterwards. Returns the gate, or None and why not."""
    assert settings.serve is not None and settings.gate is not None
    serve = settings.serve.of_base()
    try:
        with loaded_image(settings.runtime, base.tarball, base.tag) as (_, base_id):
            spec = replace(
                idle,
                image=base_id,
                name=container_name(),
                mounts=base.mounts,
                env=base.env,
                args=(*LAUNCH, *serve.args),
            )
            with running_container(settings.runtime, spec):
                host = verify_host(settings, spec.name, serve.service(), serve.smoke_spec(), "base")
                return measure_baseline(host_run(settings, host, sink), settings.gate)
    except RuntimeCallError as exc:
        return None, f"the base image's server could not be run: {exc}"


def container_name() -> str:
    """A fresh name for a container under test."""
    return f"ddtree-verify-{secrets.token_hex(4)}"


@contextmanager
def loaded_image(runtime: ContainerRuntime, tarball: str, tag: str) -> Iterator[tuple[str, str]]:
    """Yield (reference, id) of the tarball's image (tagged `tag`) loaded into the runtime;
    afterwards remove what the load added. A `tag` the load moved off another image is put
    back on that image; an image that was there already is left as it was."""
    before = image_id(runtime, tag)
    reference = load_image(runtime, tarball)
    loaded = image_id(runtime, reference) or reference
    try:
        yield reference, loaded
    finally:
        if before is None:
            remove_image(runtime, reference)
        elif before != loaded:
            tag_image(runtime, before, tag)
            remove_image(runtime, loaded)


@contextmanager
def running_container(runtime: ContainerRuntime, spec: ContainerSpec) -> Iterator[str]:
    """Yield the id of `spec` started and running; it is removed afterwards. Raises
    RuntimeCallError (with the container's output) when it does not stay up."""
    try:
        container = start_container(runtime, spec)
        if container_state(runtime, spec.name) != "running":
            said = container_logs(runtime, spec.name) or "(no output)"
            raise RuntimeCallError(f"container {spec.name} did not stay up: {said}")
        yield container
    finally:
        remove_container(runtime, spec.name)


@dataclass(frozen=True)
class _SuitesDone:
    passed: bool
    message: str
    suites: list[dict[str, Any]]
    gate: GateDetails | None = None


def verify_host(
    settings: VerifySettings,
    container: str,
    service: ServiceSpec | None = None,
    smoke: SmokeSpec | None = None,
    name: str = HOST_NAME,
) -> Host:
    """The container under test as a container host reached by the local transport: the
    agent runs with this controller's python and relays into the container."""
    return Host(
        name=name,
        address="localhost",
        transport="local",
        container=container,
        container_runtime=settings.runtime.program,  # type: ignore[arg-type]
        python=settings.python,
        host_python=sys.executable,
        state_dir=STATE_DIR,
        gpus=settings.gpus,
        service=service or ServiceSpec(kind="none"),
        smoke=smoke or SmokeSpec(),
    )


def _run_suites(
    prepared: PreparedPatchset,
    settings: VerifySettings,
    container: str,
    sources: dict[str, str],
    sink: EventSink,
) -> _SuitesDone:
    """The suites but `server`, in the idle container."""
    run = host_run(settings, verify_host(settings, container), sink)
    mine = {k: v for k, v in sources.items() if k != "server"}
    result = smoke_host(run, prepared, mine)
    suites = list(result.details.get("suites") or [])
    return _SuitesDone(result.outcome == Outcome.OK, result.message, suites)


def _run_server(
    prepared: PreparedPatchset,
    settings: VerifySettings,
    container: str,
    sources: dict[str, str],
    sink: EventSink,
    baseline: PushGate | None = None,
) -> _SuitesDone:
    """The `server` suite against the server the container runs; then, with a baseline,
    the serving gate of that server against it."""
    serve = settings.serve
    assert serve is not None
    host = verify_host(settings, container, serve.service(), serve.smoke_spec())
    mine = {k: v for k, v in sources.items() if k == "server" or k.endswith(".py")}
    run = host_run(settings, host, sink)
    passed, message, suites = serve_and_judge(run, prepared, mine)
    if not passed or baseline is None:
        return _SuitesDone(passed, message, suites)
    gate, failed = judge_image(run, baseline)
    return _SuitesDone(failed is None, failed or message, suites, gate.details())


def host_run(settings: VerifySettings, host: Host, sink: EventSink) -> HostRun:
    """A run of `host` through the local transport, the runtime's endpoint in its env."""
    run_id = new_run_id()
    transport = LocalTransport(host, env=settings.runtime.env())
    return HostRun(host, transport, HostRecorder(host.name, run_id, sink), run_id)
