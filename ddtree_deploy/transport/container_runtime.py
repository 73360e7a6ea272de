"""A container runtime on this machine (the `docker` or `podman` CLI), for `export --verify`.

The runtime is reached as its CLI reaches it: `DOCKER_HOST` (or `CONTAINER_HOST` for
podman) from the environment, or the endpoint given here, which wins. Every call is argv
without a shell; a non-zero exit raises RuntimeCallError naming the call and the tail of
what the runtime said. Containers are started with the host's network (`--network host`):
no bridge, nothing listens beyond what the image's server binds.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass

from ddtree_deploy.errors import ConfigError

RUNTIMES = ("docker", "podman")
ENDPOINT_ENV = {"docker": "DOCKER_HOST", "podman": "CONTAINER_HOST"}
PROBE_TIMEOUT_S = 30.0
LOAD_TIMEOUT_S = 1800.0
TAIL_CHARS = 2000
LOADED = re.compile(r"^Loaded image(?: ID)?: (\S+)\s*$", re.MULTILINE)


class RuntimeCallError(Exception):
    """A runtime call exited non-zero (or timed out): the call and what the runtime said."""


@dataclass(frozen=True)
class ContainerRuntime:
    """The runtime's CLI and, when given, the endpoint it talks to (else its environment's)."""

    program: str = "docker"
    endpoint: str | None = None

    def env(self) -> dict[str, str]:
        """The environment of every call: this process's, the endpoint set when given."""
        env = dict(os.environ)
        if self.endpoint:
            env[ENDPOINT_ENV[self.program]] = self.endpoint
        return env

    def where(self) -> str:
        """The endpoint for people: the one given, the environment's, or the CLI's default."""
        name = ENDPOINT_ENV[self.program]
        return self.endpoint or os.environ.get(name) or f"{self.program}'s default ({name} unset)"

    def call(self, *args: str, timeout_s: float = 120.0) -> subprocess.CompletedProcess[str]:
        """Run the CLI with `args` (no stdin); never raises on its exit (see `check`)."""
        return subprocess.run(
            [self.program, *args],
            capture_output=True,
            text=True,
            errors="replace",
            timeout=timeout_s,
            env=self.env(),
            stdin=subprocess.DEVNULL,
        )

    def check(self, *args: str, timeout_s: float = 120.0) -> str:
        """Run the CLI; return its stdout stripped. Raises RuntimeCallError on a non-zero
        exit or a timeout, naming the call."""
        try:
            done = self.call(*args, timeout_s=timeout_s)
        except subprocess.TimeoutExpired:
            said = f"{self.program} {args[0]}: timed out after {timeout_s}s"
            raise RuntimeCallError(said) from None
        if done.returncode != 0:
            said = (done.stderr.strip() or done.stdout.strip())[-TAIL_CHARS:]
            raise RuntimeCallError(f"{self.program} {' '.join(args[:2])}: {said}")
        return done.stdout.strip()


def require_runtime(runtime: ContainerRuntime) -> str:
    """Return the server version of a runtime that answers. Raises ConfigError (bad
    input: exit 2, never a silent pass) when its CLI is not installed or its daemon does
    not answer at the endpoint, naming both."""
    if runtime.program not in RUNTIMES:
        raise ConfigError(f"--runtime {runtime.program!r}: expected one of {', '.join(RUNTIMES)}")
    if shutil.which(runtime.program) is None:
        raise ConfigError(
            f"--verify needs a container runtime: `{runtime.program}` is not installed here"
        )
    try:
        done = runtime.call("version", "--format", "{{.Server.Version}}", timeout_s=PROBE_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        done = None
    if done is None or done.returncode != 0 or not done.stdout.strip():
        said = (done.stderr.strip()[-400:] if done else "") or "no answer"
        raise ConfigError(
            f"--verify needs a reachable container runtime: {runtime.program} at "
            f"{runtime.where()} does not answer ({said}); start it or point "
            f"--docker-host / {ENDPOINT_ENV[runtime.program]} at one"
        )
    return done.stdout.strip()


def load_image(runtime: ContainerRuntime, tarball: str) -> str:
    """`load -i tarball`; return the reference it loaded (NAME:TAG, or the image id when
    the tarball names none). Raises RuntimeCallError."""
    said = runtime.check("load", "-i", tarball, timeout_s=LOAD_TIMEOUT_S)
    found = LOADED.findall(said)
    if not found:
        raise RuntimeCallError(f"{runtime.program} load -i {tarball}: no image named in {said!r}")
    return str(found[-1])


def image_id(runtime: ContainerRuntime, reference: str) -> str | None:
    """The id of the image `reference` names, None when the runtime has none."""
    done = runtime.call("image", "inspect", "--format", "{{.Id}}", reference)
    return done.stdout.strip() if done.returncode == 0 and done.stdout.strip() else None


@dataclass(frozen=True)
class ContainerSpec:
    """One container to start: image, the program it idles in, mounts, environment."""

    image: str
    name: str
    entrypoint: str
    args: tuple[str, ...] = ()
    mounts: tuple[str, ...] = ()  # SRC:DST[:ro], as `-v` takes them
    env: Mapping[str, str] | None = None
    user: str | None = None
    gpus: int = 0  # `--gpus N` (docker with the NVIDIA toolkit); 0: none
    # /dev/shm's size limit (a runtime's default is 64 MB; sglang's docs run its image with
    # `--shm-size 32g`: its processes share tensors there). A limit, not an allocation.
    shm_size: str | None = None


def run_argv(spec: ContainerSpec) -> list[str]:
    """The argv (after the program) that starts `spec` detached on the host's network."""
    argv = ["run", "-d", "--network", "host", "--name", spec.name, "--entrypoint", spec.entrypoint]
    for mount in spec.mounts:
        argv += ["-v", mount]
    for key, value in (spec.env or {}).items():
        argv += ["-e", f"{key}={value}"]
    if spec.user:
        argv += ["--user", spec.user]
    if spec.gpus:
        argv += ["--gpus", str(spec.gpus)]
    if spec.shm_size:
        argv += ["--shm-size", spec.shm_size]
    return [*argv, spec.image, *spec.args]


def start_container(runtime: ContainerRuntime, spec: ContainerSpec) -> str:
    """Start `spec` detached; return the container id. Raises RuntimeCallError."""
    return runtime.check(*run_argv(spec), timeout_s=300.0)


def container_state(runtime: ContainerRuntime, name: str) -> str:
    """The container's state (running, exited...), "" when there is none."""
    done = runtime.call("inspect", "--format", "{{.State.Status}}", name)
    return done.stdout.strip() if done.returncode == 0 else ""


def container_logs(runtime: ContainerRuntime, name: str, lines: int = 40) -> str:
    """The container's last `lines` lines of output (stdout and stderr), "" when none."""
    done = runtime.call("logs", "--tail", str(lines), name)
    return (done.stdout + done.stderr).strip()[-TAIL_CHARS:]


def remove_container(runtime: ContainerRuntime, name: str) -> None:
    """Remove the container (forced: it is stopped first); a missing one is no error."""
    runtime.call("rm", "-f", name, timeout_s=120.0)


def tag_image(runtime: ContainerRuntime, image: str, tag: str) -> None:
    """Put `tag` on `image` (an id); best effort."""
    runtime.call("tag", image, tag, timeout_s=60.0)


def remove_image(runtime: ContainerRuntime, reference: str) -> None:
    """Untag/remove the image `reference`; best effort (an image in use stays)."""
    runtime.call("rmi", reference, timeout_s=120.0)


def mount_spec(text: str) -> str:
    """Return `SRC:DST[:ro|rw]` checked (both absolute, no newline/NUL); raises ConfigError."""
    parts = text.split(":")
    bad = ConfigError(f"--verify-mount {text!r}: expected SRC:DST or SRC:DST:ro (absolute paths)")
    if len(parts) not in (2, 3) or any("\x00" in p or "\n" in p for p in parts):
        raise bad
    if not all(p.startswith("/") for p in parts[:2]) or parts[2:] not in ([], ["ro"], ["rw"]):
        raise bad
    return text


def env_pair(text: str) -> tuple[str, str]:
    """Return (KEY, VALUE) of `KEY=VALUE`; raises ConfigError for any other text."""
    key, sep, value = text.partition("=")
    if not sep or not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", key) or "\x00" in value:
        raise ConfigError(f"--verify-env {text!r}: expected KEY=VALUE")
    return key, value
