"""The services op: what each of the host's services is doing now, for `status` (read-only:
it runs the status command or `systemctl is-active`, and asks the health URL once)."""

from .health_probe import get_status
from .ops_service import run_argv
from .wire_outcomes import ServicesResult, ServiceState

STATE_TIMEOUT_S = 10  # status command and health probe: `status` must not hang on one service


def op_services(ctx, args):
    """Return a ServicesResult: one ServiceState (name, kind, running, health) per service,
    in inventory order."""
    return ServicesResult([_state(service) for service in args.services])


def _state(service):
    """One service's state (see op_services)."""
    argv = None
    if service.kind == "systemd":
        argv = ["systemctl", "is-active", service.unit]
    elif service.kind == "command" and service.status:
        argv = service.status
    running = None if argv is None else run_argv(argv, STATE_TIMEOUT_S)[0] == 0
    return ServiceState(service.name, service.kind, running, _probe(service.health_url))


def _probe(url):
    """What `url` answers to one GET now (no proxy: it is the host's own server)."""
    try:
        return "HTTP %s" % get_status(url, STATE_TIMEOUT_S)
    except (OSError, ValueError) as exc:
        return "no answer: %s" % (exc,)
