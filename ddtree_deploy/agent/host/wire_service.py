"""The agent protocol's records for the ops that touch the running server: restart,
health, smoke and the serving gate's measurement (re-exported by wire.py, where OP_ARGS
maps op names to them). Stdlib only."""

from typing import Any, Dict, List, Optional

from .record import Record, field


class Service(Record):
    """How the host's server restarts and answers health checks (argv lists, no shell).

    api_key_file / api_key_env: where the server's API key is on the host, so the log tail
    sent back with a failure has it redacted (sglang logs its server args at start).
    fail_patterns / progress_patterns: regexes the health op matches against the lines the
    log_file gains while the server starts; kill_leftovers: the restart ends what a stopped
    instance left behind instead of refusing to start beside it. name: how the results
    name it (one host may run several), and the key of its start marker in the request.
    """

    kind: str
    name: str = "service"
    unit: Optional[str] = None
    start: Optional[List[str]] = None
    stop: Optional[List[str]] = None
    status: Optional[List[str]] = None
    log_file: Optional[str] = None
    args_file: Optional[str] = None
    health_url: str = "http://127.0.0.1:30000/health_generate"
    ready_timeout_s: float = 600.0
    poll_interval_s: float = 1.0
    api_key_file: Optional[str] = None
    api_key_env: Optional[str] = None
    fail_patterns: List[str] = field(default_factory=list)
    progress_patterns: List[str] = field(default_factory=list)
    kill_leftovers: bool = False


class ServicesArgs(Record):
    """services: report each service's state (running as its status or systemd says, and
    what its health URL answers now); read-only, for `status`."""

    NESTED = (("services", Service, "list"),)
    services: List[Service]


class SmokeSuite(Record):
    """One suite script (its source), the JSON it reads on stdin, its time limit."""

    name: str
    source: str
    input: Dict[str, Any]
    timeout_s: float = 600


class RestartArgs(Record):
    """restart: the service, the limit per command (timeout_s, seconds), how long to wait
    before it (after_s: the stagger after the previous service's start), and the action:
    "restart", or a restart group's "stop" (every member first) and "start"."""

    NESTED = (("service", Service, "one"),)
    service: Service
    timeout_s: float = 300
    after_s: float = 0.0
    action: str = "restart"


class HealthArgs(Record):
    """health: the service to poll; force polls even a kind = "none" service."""

    NESTED = (("service", Service, "one"),)
    service: Service
    force: bool = False


class SmokeArgs(Record):
    """smoke: the suites to run, and support modules ({file name: source}) beside them.

    `suites` run one after another. beside: suites run at the same time, each in a process
    of its own, whose results never fail this op: they come back as the answer a smoke op of
    their own would give (SmokeResult.beside), e.g. a push's reference recorded from the
    old server while the pre-restart suites run.
    """

    NESTED = (("suites", SmokeSuite, "list"), ("beside", SmokeSuite, "list"))
    suites: List[SmokeSuite]
    support: Dict[str, str] = field(default_factory=dict)
    beside: List[SmokeSuite] = field(default_factory=list)


class GateArgs(Record):
    """gate_measure: replay `prompts` greedily against the running server (warm-up, then
    `rounds` rounds, one request at a time) and, with load_requests > 0, a sustained load
    (at least load_requests requests, `concurrency` in flight, for at least bake_s seconds)
    while health_url is polled; /metrics text before and after when `metrics`.

    prompts: {"input_ids": [...]} or {"text": "..."} objects. phase labels the result
    (baseline | after | rollback | check). save_as: where to write the measurement as JSON
    (0600), relative to the state dir (e.g. backups/<deploy_id>/gate-baseline.json); read_as:
    a stored measurement to return beside it (the `gate` command's recorded baseline).
    api_key_file / api_key_env: where the server's API key is on the host (sent as
    `Authorization: Bearer` to every path but /health* and /metrics).
    """

    server_url: str
    prompts: List[Dict[str, Any]]
    phase: str = "after"
    max_new_tokens: int = 32
    warmup_requests: int = 2
    rounds: int = 3
    request_timeout_s: float = 60.0
    load_requests: int = 0
    concurrency: int = 4
    bake_s: float = 0.0
    health_url: Optional[str] = None
    health_every_s: float = 2.0
    metrics: bool = False
    save_as: Optional[str] = None
    read_as: Optional[str] = None
    api_key_file: Optional[str] = None
    api_key_env: Optional[str] = None
