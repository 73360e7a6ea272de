"""The ops that touch the running server: restart and health (with the start-up watchdog)."""

import re
import subprocess
import time

from .api_key import read_api_key, redact
from .health_probe import get_status
from .service_systemd import add_restarts, start_marker, unit_watch
from .service_watch import LogWatch, end_processes, find_leftovers, gpu_apps, log_size
from .wire import Code, OpFailed
from .wire_outcomes import HealthResult, RestartResult, ServiceFailure

LOG_TIMEOUT_S = 30
STATUS_TIMEOUT_S = 30
HEALTH_REQUEST_TIMEOUT_S = 20  # sglang's own health probe may take up to 20 s: never cut it
STATUS_EVERY_POLLS = 5  # a `command` service's status is asked every this many health polls
FIRST_RETRY_S = 0.005  # health: the wait after the first refused poll, doubled up to the interval
# a fail line: how long the traceback's last line (the error) may take (2 s missed it once on
# a loaded 2-core machine)
ERROR_WAIT_S = 5.0
ERROR_LINE = re.compile(r"\b([A-Z]\w*(?:Error|Exception): .+)$")  # `ValueError: why`, any prefix


def run_argv(argv, timeout_s):
    """Run `argv` (no shell, no stdin) for at most `timeout_s` seconds; return (exit code,
    the last 4000 characters of stdout+stderr). 127: not found; 124: timed out."""
    try:
        done = subprocess.run(
            argv, capture_output=True, text=True, timeout=timeout_s, stdin=subprocess.DEVNULL
        )
        return done.returncode, (done.stdout + done.stderr)[-4000:]
    except FileNotFoundError:
        return 127, "command not found: %s" % argv[0]
    except subprocess.TimeoutExpired:
        return 124, "timed out after %ss: %s" % (timeout_s, argv[0])


def _service_log(service):
    """Return the service's last 50 log lines (journalctl for systemd, else its log_file),
    the server's API key redacted: sglang logs its server args, key included, at start."""
    key = read_api_key(service.api_key_file, service.api_key_env)[0]
    return redact(_read_log(service), key)


def _read_log(service):
    """Return the service's last 50 log lines as they are."""
    if service.kind == "systemd":
        argv = ["journalctl", "-u", service.unit, "-n", "50", "--no-pager"]
        return run_argv(argv, LOG_TIMEOUT_S)[1]
    if service.log_file:
        try:
            with open(service.log_file, encoding="utf-8", errors="replace") as fh:
                return "".join(fh.readlines()[-50:])
        except OSError as exc:
            return "cannot read %s: %s" % (service.log_file, exc)
    return ""


def op_restart(ctx, args):
    """Restart the service: stop (its stop command, or systemctl stop), the clean-start
    check, start (its start and status commands, or systemctl start + is-active); return a
    RestartResult: restarted (the clean start's GPU note, the leftovers it ended), or
    skipped for kind "none". args.action "stop" only stops it (stopped), "start" only
    checks and starts it (a restart group's two phases).

    Clean start: after the stop, a process still listening on the health URL's port or an
    orphaned sglang:: process of this user would make the start fail (address in use, CUDA
    out of memory), and the rollback's start after it. With kill_leftovers they are ended
    (TERM, then KILL); otherwise the restart fails naming them.
    Where the service's log ends is kept in ctx for the health op's watchdog (for systemd:
    the journal cursor before the restart and NRestarts after it), per service name.

    Raises OpFailed(restart_failed) with the command's output and the service log.
    """
    service, action = args.service, args.action
    if service.kind == "systemd":
        stop = ["systemctl", "stop", service.unit]
        steps = [["systemctl", "start", service.unit], ["systemctl", "is-active", service.unit]]
    elif service.kind == "command":
        stop = service.stop
        steps = [service.start] + ([service.status] if service.status else [])
    elif service.kind == "container":  # only the host can: relay.py runs it there
        message = "a container service restarts from the host, but the request names no container"
        raise OpFailed(Code.RESTART_FAILED, message)
    else:
        return RestartResult(skipped=True)
    if action not in ("restart", "stop", "start"):
        raise OpFailed(Code.RESTART_FAILED, "unknown service action %r" % (action,))
    if args.after_s > 0:
        time.sleep(args.after_s)
    if action != "start":  # "stop": a restart group stops every member before any starts
        _run_step(service, stop, args.timeout_s)
    if action == "stop":
        return RestartResult(stopped=True, service=service.name)
    ended, gpu = _clean_start(service)
    result = RestartResult(restarted=True, service=service.name, leftovers_ended=ended, gpu=gpu)
    unit = start_marker(service.unit) if service.kind == "systemd" else None
    _start_markers(ctx)[service.name] = (log_size(service.log_file), time.monotonic(), unit)
    for argv in steps:
        _run_step(service, argv, args.timeout_s)
    if unit is not None:
        add_restarts(unit, service.unit)
    return result


def _start_markers(ctx):
    """{service name: (its log's size, monotonic time, systemd unit marker or None) at its
    start}: where the health op's watchdog begins reading, kept for the rest of the request."""
    markers = getattr(ctx, "service_starts", None)
    if markers is None:
        markers = ctx.service_starts = {}
    return markers


def _run_step(service, argv, timeout_s):
    """Run one service command; raise OpFailed(restart_failed) when it exits non-zero."""
    rc, output = run_argv(argv, timeout_s)
    if rc != 0:
        raise OpFailed(
            Code.RESTART_FAILED,
            _named(service, "%s exited %s" % (" ".join(argv), rc)),
            ServiceFailure(output=output, log=_service_log(service), service=service.name),
        )


def _clean_start(service):
    """Check that the stopped instance left nothing behind; end what it left when
    kill_leftovers, else raise OpFailed(restart_failed) naming the pids.

    Returns (the processes ended, None when there were none; the note on the GPU).
    """
    note, apps = gpu_apps()
    found = find_leftovers(service.health_url)
    if not found:
        return None, note
    used = {app["pid"]: app["used_mib"] for app in apps}
    for proc in found:
        if proc["pid"] in used:
            proc["gpu_mib"] = used[proc["pid"]]
    shown = "; ".join("pid %(pid)s (%(why)s: %(cmdline)s)" % p for p in found)
    refused = ServiceFailure(leftovers=found, gpu=note)
    if not service.kill_leftovers:
        message = (
            "the stopped service left processes behind: %s; not starting beside them "
            "(end them, or set kill_leftovers = true)" % shown
        )
        raise OpFailed(Code.RESTART_FAILED, _named(service, message), refused)
    alive = end_processes([p["pid"] for p in found])
    if alive:
        message = "leftover processes did not end after SIGKILL: %s" % alive
        raise OpFailed(Code.RESTART_FAILED, _named(service, message), refused)
    return found, note


def op_health(ctx, args):
    """Poll the service's health_url from the host until HTTP 200; return
    a HealthResult: healthy after n polls, with the progress seen, or skipped for kind "none"
    (unless force).

    The first poll goes at once; after a refusal the wait starts at FIRST_RETRY_S and
    doubles up to the service's poll_interval_s, so a server that is up within milliseconds
    of its start (or of the restart op's status) costs milliseconds, not a whole interval.

    Watchdog: every poll also reads the lines the service's log_file gained since its
    start (the marker the restart op left for this service; else since this op began), or
    for a systemd unit its journal after the cursor taken before the restart. A line
    matching a fail pattern ends the wait at once; lines matching progress patterns come
    back as "progress" ({"after_s", "pattern", "line"}, in order), with the answer or the
    failure.

    Raises OpFailed(unhealthy) after ready_timeout_s seconds, as soon as a fail pattern
    matches, as soon as a `command` service's status says it stopped, or as soon as a
    systemd unit is failed/inactive or its NRestarts grew since the restart (a restart
    loop; asked at most every UNIT_CHECK_S). The probe (health_probe.get_status) uses no
    proxy (a local URL) and follows no redirect.
    """
    service = args.service
    if service.kind == "none" and not args.force:
        return HealthResult(skipped=True)
    offset, started, marker = _start_markers(ctx).get(service.name) or (
        log_size(service.log_file),
        time.monotonic(),
        None,
    )
    key = read_api_key(service.api_key_file, service.api_key_env)[0]
    unit = unit_watch(marker, service.unit) if service.kind == "systemd" else None
    patterns = (service.fail_patterns, service.progress_patterns)
    source = unit.journal.read if unit else None
    watch = LogWatch(service.log_file, offset, *patterns, started, key, source=source)
    deadline = started + float(service.ready_timeout_s)
    last, polls = "no answer yet", 0
    interval_s, wait_s = float(service.poll_interval_s), FIRST_RETRY_S
    while True:
        polls += 1
        try:
            status = get_status(service.health_url, HEALTH_REQUEST_TIMEOUT_S)
        except (OSError, ValueError) as exc:
            last = str(exc)
        else:
            if status == 200:
                watch.poll()
                name, progress = service.name, watch.progress
                return HealthResult(healthy=True, polls=polls, progress=progress, service=name)
            last = "HTTP %s" % status
        failed = watch.poll()
        waited = "after %.1fs" % (time.monotonic() - started)
        if failed is not None:
            message = "the service log matched fail pattern %r %s: %s" % (
                failed[0],
                waited,
                failed[1],
            )
            error = _error_line(service)
            if error:
                message += "; the server's error: " + error
            _unhealthy(service, message, watch)
        if time.monotonic() >= deadline:
            message = "%s not ready after %ss (last: %s)" % (
                service.health_url,
                service.ready_timeout_s,
                last,
            )
            _unhealthy(service, message, watch)
        why = unit.failure() if unit else None
        if why:
            watch.poll()  # the lines the dying instance wrote, for the progress
            _unhealthy(
                service, "%s, %s (%s last: %s)" % (why, waited, service.health_url, last), watch
            )
        if _service_exited(service, polls):
            message = "the service exited while starting, %s (%s says stopped; %s last: %s)" % (
                waited,
                " ".join(service.status),
                service.health_url,
                last,
            )
            _unhealthy(service, message, watch)
        time.sleep(max(0.0, min(wait_s, interval_s, deadline - time.monotonic())))
        wait_s = min(wait_s * 2, interval_s)


def _error_line(service):
    """The last `SomeError: why` line of the service's log (redacted, at most 300 chars), or
    None. A fail pattern matches a traceback's first line (sglang's `Scheduler hit an
    exception: Traceback ...`); the error that says why (a start-up refusal's own words)
    is its last, so the log is read again for up to ERROR_WAIT_S until one shows."""
    deadline = time.monotonic() + ERROR_WAIT_S
    while True:
        for line in reversed(_service_log(service).splitlines()):
            found = ERROR_LINE.search(line.rstrip())
            if found:
                return found.group(1)[:300]
        if time.monotonic() >= deadline:
            return None
        time.sleep(0.2)


def _unhealthy(service, message, watch):
    """Raise OpFailed(unhealthy) with the log tail and the progress seen so far."""
    log, progress = _service_log(service), watch.progress
    data = ServiceFailure(log=log, progress=progress, service=service.name)
    raise OpFailed(Code.UNHEALTHY, _named(service, message), data)


def _named(service, message):
    """`message`, led by the service's name when the host has several (not "service")."""
    return message if service.name == "service" else "%s: %s" % (service.name, message)


def _service_exited(service, polls):
    """For a `command` service with a status command, every few polls: True when it says
    the server is not running, so a server that crashed while starting fails health at once
    instead of after ready_timeout_s."""
    if service.kind != "command" or not service.status:
        return False
    if polls % STATUS_EVERY_POLLS:
        return False
    return run_argv(service.status, STATUS_TIMEOUT_S)[0] != 0
