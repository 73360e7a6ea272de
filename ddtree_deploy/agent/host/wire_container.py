"""The agent protocol's records for hosts whose server runs in a container (stdlib only).

Such a host's agent process runs ON THE HOST (its `host_python`) and relays each request:
host-side ops (today: the restart of a `container` service, `RUNTIME restart NAME`) run
there, every other op runs in the container's own agent (`RUNTIME exec -i NAME PYTHON`).
The request names the container with a `ContainerSpec`; the facts op's answer gains the
container as inspected (`ContainerFacts`).
"""

from typing import Any, Dict, List, Optional

from .record import Record
from .wire import OpName

# Why the relay could not run a request at all (AgentResponse.code): the container's agent
# could not be started (no runtime, no such container, not running, no python inside it):
# nothing ran, bad input. Or its agent died mid-request without an answer (a lost link).
NOT_STARTED = "container_not_started"
AGENT_LOST = "container_agent_lost"


class ContainerSpec(Record):
    """The container a request is relayed into: its runtime (docker | podman), its name,
    and the argv that starts its agent (`RUNTIME exec -i NAME PYTHON -c BOOTSTRAP`)."""

    runtime: str
    name: str
    argv: List[str]


# A container its restart policy is restarting takes no `exec` ("is restarting, wait until
# the container is running"): the relay waits this long for it to run again (a rollback of
# a crash-looping server lands in the seconds the container runs between two crashes).
RESTARTING_WAIT_S = 60


class ContainerFacts(Record):
    """The container as `RUNTIME inspect` saw it from the host: full id (a new id means a
    new container, so a new writable layer), image as named at `run`, image id, running,
    main pid (host's view) and when it started; restart_count, the restarts its restart
    policy made (docker and podman `RestartCount`), exit_code, how its main process last
    ended (None while it runs); restarting, True while its restart policy is restarting it
    (no `exec` is taken then; None otherwise)."""

    OMIT_IF_NONE = ("restart_count", "exit_code", "restarting")
    name: str
    runtime: str
    id: str
    image: Optional[str]
    image_id: Optional[str]
    running: bool
    pid: Optional[int]
    started_at: Optional[str]
    restart_count: Optional[int] = None
    exit_code: Optional[int] = None
    restarting: Optional[bool] = None


def runs_on_host(op: Dict[str, Any]) -> bool:
    """True for an op (a request's {"op", "args"}) that must run on the host, outside the
    container: the restart of a `container` service (it stops the container's processes,
    the agent inside included)."""
    if op.get("op") != OpName.RESTART:
        return False
    service = (op.get("args") or {}).get("service") or {}
    return service.get("kind") == "container"


def read_inspect(spec: ContainerSpec, inspected: Any) -> ContainerFacts:
    """Return the ContainerFacts of `RUNTIME inspect`'s JSON (a list of one object; docker
    and podman both name the fields below). Raises ValueError when it is not that shape."""
    if not isinstance(inspected, list) or not inspected or not isinstance(inspected[0], dict):
        raise ValueError("unexpected inspect output")
    found = inspected[0]
    config = found.get("Config") or {}
    state = found.get("State") or {}
    image = config.get("Image") or found.get("ImageName") or found.get("Image")
    pid = state.get("Pid")
    return ContainerFacts(
        name=spec.name,
        runtime=spec.runtime,
        id=str(found["Id"]),
        image=image,
        image_id=found.get("Image"),
        running=bool(state.get("Running")),
        pid=int(pid) if pid else None,
        started_at=state.get("StartedAt"),
        restart_count=_int_or_none(found.get("RestartCount")),
        exit_code=None if state.get("Running") else _int_or_none(state.get("ExitCode")),
        restarting=True if state.get("Restarting") else None,
    )


def _int_or_none(value: Any) -> Optional[int]:
    return int(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def died_while_starting(before: ContainerFacts, now: Optional[ContainerFacts], after_s: float):
    """Why the container's agent died during the health wait after our restart, from the
    container as inspected right after that restart (`before`) and now (None: it is gone);
    None when the container still runs as we started it (the agent died of something else).

    The runtime kills every process in a container that stops or restarts, the agent exec'd
    into it included: a server that crashes while starting ends the wait at once this way,
    whatever ready_timeout_s says.
    """
    waited = "%.1fs after the restart" % after_s
    if now is None:
        return "container %r is gone, %s" % (before.name, waited)
    if now.id != before.id:
        return "container %r was recreated (id %s), %s" % (before.name, now.id[:12], waited)
    if not now.running:
        code = "" if now.exit_code is None else " (exit code %s)" % now.exit_code
        return "container %r exited while starting%s, %s" % (before.name, code, waited)
    counts = (before.restart_count or 0, now.restart_count or 0)
    if counts[1] > counts[0] or (now.pid, now.started_at) != (before.pid, before.started_at):
        what = "container %r was restarted by its restart policy while starting" % before.name
        return "%s (a crash: RestartCount %s -> %s), %s" % (what, counts[0], counts[1], waited)
    return None
