"""The agent protocol's records for hosts whose server runs in a container (stdlib only).

Such a host's agent process runs ON THE HOST (its `host_python`) and relays each request:
host-side ops (today: the restart of a `container` service, `RUNTIME restart NAME`) run
there, every other op runs in the container's own agent (`RUNTIME exec -i NAME PYTHON`).
The request names the container with a `ContainerSpec`; the facts op's answer gains the
container as inspected (`ContainerFacts`).
"""

import dataclasses
from typing import Any, Dict, List, Optional

from .record import Record

# Why the relay could not run a request at all (AgentResponse.code): the container's agent
# could not be started (no runtime, no such container, not running, no python inside it):
# nothing ran, bad input. Or its agent died mid-request without an answer (a lost link).
NOT_STARTED = "container_not_started"
AGENT_LOST = "container_agent_lost"


@dataclasses.dataclass(frozen=True)
class ContainerSpec(Record):
    """The container a request is relayed into: its runtime (docker | podman), its name,
    and the argv that starts its agent (`RUNTIME exec -i NAME PYTHON -c BOOTSTRAP`)."""

    runtime: str
    name: str
    argv: List[str]


@dataclasses.dataclass(frozen=True)
class ContainerFacts(Record):
    """The container as `RUNTIME inspect` saw it from the host: full id (a new id means a
    new container, so a new writable layer), image as named at `run`, image id, running,
    main pid (host's view) and when it started."""

    name: str
    runtime: str
    id: str
    image: Optional[str]
    image_id: Optional[str]
    running: bool
    pid: Optional[int]
    started_at: Optional[str]


def runs_on_host(op: Dict[str, Any]) -> bool:
    """True for an op (a request's {"op", "args"}) that must run on the host, outside the
    container: the restart of a `container` service (it stops the container's processes,
    the agent inside included)."""
    if op.get("op") != "restart":
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
    )
