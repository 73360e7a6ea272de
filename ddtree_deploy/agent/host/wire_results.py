"""Typed results of the ops whose data the controller reads: facts, check_plan, backup,
smoke. Stdlib only; the agent builds them and sends `to_dict()`, the controller reads them
back with `from_dict()` (see `OpResult.result_as` in agent/protocol.py)."""

from typing import Any, Dict, List, Optional, TypedDict

from .record import Record, field
from .wire_container import ContainerFacts

# The host's state files, as the facts op reads them back: plain JSON objects written by
# older agents too, so these are key names for the type checker (total=False: any may be
# missing), not records checked key by key.


class LockRecord(TypedDict, total=False):
    """The host lock (op_lock_acquire): the run and controller process holding it, since
    when and until when (`expires_epoch`, seconds since the epoch); `replaced`, the lock it
    took over. An unreadable lock file reads as {holder, expires_epoch: 0}."""

    run_id: str
    holder: str
    pid: Optional[int]
    controller: Optional[str]
    started: str
    expires_epoch: float
    replaced: "LockRecord"


class JournalEntry(TypedDict, total=False):
    """One journal line: a deploy's state (installing, committed, rolled_back, ...) and what
    the controller recorded with it (holder: who ran it, `user@machine pid N`, from
    entries written since history); an unreadable line is {state: corrupt, raw}."""

    deploy_id: str
    state: str
    ts: str
    run_id: str
    holder: str
    patchset: str
    backup: str
    files: Dict[str, str]
    reason: str
    error: str
    raw: str
    container_id: str
    image: Optional[str]


class HistoryResult(Record):
    """What the history op found: the journal entries (journal.jsonl and its rotated
    files, each entry once, oldest first) of the last deploys asked for; how many deploys
    the journal remembers in all, and how many of its lines could not be read."""

    entries: List[JournalEntry]
    deploys: int
    corrupt: int = 0


class BackupEntry(TypedDict):
    """One backup dir: its deploy, when it was made and of which patchset (None, and
    `broken`, when its manifest cannot be read)."""

    deploy_id: str
    created: Optional[str]
    patchset: Optional[str]
    broken: bool


class ServeFound(Record):
    """The serve file as found: its sha256 and text (both None when absent; `error` when
    it could not be read)."""

    OMIT_IF_NONE = ("error",)
    path: str
    sha256: Optional[str]
    text: Optional[str]
    error: Optional[str] = None


class FileFacts(Record):
    """One patched path on the host: sha256 now, sha256 in the dist's RECORD (None for an
    editable install, whose RECORD lists no package files: the lock's base hashes judge it),
    and why it is unsafe (a symlink leading out of the package root), if it is."""

    OMIT_IF_NONE = ("unsafe",)
    sha256: Optional[str]
    record_sha256: Optional[str]
    unsafe: Optional[str] = None


class Facts(Record):
    """What the facts op found on the host.

    site_packages/package_version are None when the package is not installed;
    site_packages is where its dist-info lies, package_root the directory the patchset's
    paths are relative to (the package's parent dir, found from its import spec: the same as
    site_packages for a wheel, the source tree for an editable install), install_kind
    "wheel" | "editable"; locate_error says why the package cannot be patched where Python
    imports it (package_root is then None). api_key_error: why the inventory's API key
    (smoke.api_key_file / api_key_env) cannot be read on the host (never the key itself);
    service_error: a systemd unit of the inventory that the host's systemd does not know;
    state_dir_free_bytes is the free space (bytes) of the filesystem holding the state dir;
    lock is the lock record or None; journal_tail is the journal's last lines, deploys each
    deploy's latest entry (pending: those still unfinished), backups the backup dirs;
    user is the user the agent runs as (become_user under become), "#UID" without a name.
    container: on a container host, the container as inspected from the host (the relay
    adds it; None elsewhere).
    """

    NESTED = (
        ("serve", ServeFound, "one"),
        ("files", FileFacts, "map"),
        ("container", ContainerFacts, "one"),
    )
    OMIT_IF_NONE = ("locate_error", "api_key_error", "service_error", "container")
    serve: Optional[ServeFound]
    python: str
    executable: str
    hostname: str
    agent_pid: int
    site_packages: Optional[str]
    package_version: Optional[str]
    package_root: Optional[str]
    install_kind: Optional[str]
    files: Dict[str, FileFacts]
    state_dir_free_bytes: int
    gpus: List[str]
    lock: Optional[LockRecord]
    journal_tail: List[JournalEntry]
    deploys: List[JournalEntry]
    pending: List[JournalEntry]
    backups: List[BackupEntry]
    user: Optional[str] = None
    locate_error: Optional[str] = None
    api_key_error: Optional[str] = None
    service_error: Optional[str] = None
    container: Optional[ContainerFacts] = None


class PlanResult(Record):
    """check_plan's verdict per path: unchanged, pending, upgrade or drifted."""

    files: Dict[str, str]


class BackupResult(Record):
    """Where the backup is (a directory on the host) and how many files it covers."""

    backup: str
    files: int


class SmokeResult(Record):
    """Each suite's result line as the suite printed it (suite, passed, skipped, details,
    checks, duration_s, ...): free-form, so kept as dicts. beside: with SmokeArgs.beside,
    the op entry ({op, ok, data, error, code, duration_s}) a smoke op of just those suites
    would have answered (its duration their wall time), else None (left out)."""

    OMIT_IF_NONE = ("beside",)
    suites: List[Dict[str, Any]]
    beside: Optional[Dict[str, Any]] = None

    def failed(self):
        """Return the results of the suites that neither passed nor were skipped."""
        return [r for r in self.suites if not r.get("passed") and not r.get("skipped")]


class ReplayStats(Record):
    """The replay: every prompt one request at a time, `rounds` times after the warm-up.

    rounds: one {tokens, wall_s} per round (its throughput is tokens / wall_s);
    latencies_s: every request's latency, in order; verify_ct: the sum of
    meta_info.spec_verify_ct (0: the server does not speculate); outputs: the output ids of
    each prompt in the first round (None where that request failed).
    """

    requests: int
    errors: int
    first_error: Optional[str]
    tokens: int
    verify_ct: int
    rounds: List[Dict[str, float]]
    latencies_s: List[float]
    outputs: List[Optional[List[int]]]


class LoadStats(Record):
    """The sustained load and bake: requests sent, errors (HTTP errors, timeouts, bad
    answers) with the first one, tokens generated, wall time, every latency, and the health
    polls made meanwhile with their failures. stopped_early says why the load ended before
    its plan (e.g. "8 consecutive errors"), else None."""

    requests: int
    errors: int
    first_error: Optional[str]
    tokens: int
    wall_s: float
    latencies_s: List[float]
    health_polls: int
    health_failures: int
    first_health_failure: Optional[str]
    stopped_early: Optional[str] = None


class GateMeasurement(Record):
    """What gate_measure measured on one server at one phase (baseline | after | rollback |
    check): when, where, the algorithm /server_info reported (None: no speculation or no
    answer), the replay, the load (None for a quick gate), /metrics text before and after
    (None when not asked or not served; metrics_error says why). saved: the path it was
    written to on the host; stored: the measurement read from read_as (a dict), if asked.
    prompts and max_new_tokens: what was replayed (a later comparison must replay the same;
    empty/0 in a measurement written before they were recorded)."""

    NESTED = (("replay", ReplayStats, "one"), ("load", LoadStats, "one"))
    OMIT_IF_NONE = ("stored",)
    phase: str
    at: str
    server_url: str
    algorithm: Optional[str]
    replay: ReplayStats
    load: Optional[LoadStats]
    metrics_before: Optional[str]
    metrics_after: Optional[str]
    metrics_error: Optional[str]
    saved: Optional[str]
    stored: Optional[Dict[str, Any]] = None
    prompts: List[Dict[str, Any]] = field(default_factory=list)
    max_new_tokens: int = 0
