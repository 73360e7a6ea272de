"""The ops that look before anything changes: facts, check_plan; and the host lock and
journal that guard and record a change."""

import base64
import csv
import json
import os
import pwd
import shutil
import subprocess
import sys
import time

from .api_key import read_api_key
from .files import append_line, check_owners, check_serve_path, now_utc, safe_join
from .locate import locate_package
from .pure import classify_file, sha256_bytes, sha256_file
from .service_systemd import missing_units
from .state import (
    UNFINISHED,
    deploy_states,
    find_distribution,
    list_backups,
    read_journal,
    read_lock,
    rotate_journal,
)
from .wire import Code, OpFailed, OpHalt, OpName
from .wire_outcomes import JournalAppended, LockRefusal, LockReleased, LockTaken
from .wire_results import Facts, FileFacts, LockRecord, PlanResult, ServeFound

SERVE_MAX_BYTES = 65536  # the most of the serve file facts read back
GPU_QUERY_TIMEOUT_S = 20


def op_facts(ctx, args):
    """Return Facts: python, installed package version, where its files are (from its
    import spec: a wheel's site-packages or an editable install's source tree), hashes of
    args.paths there, free disk (bytes), GPUs, lock, journal tail, unfinished deploys,
    backups, the serve file, and whether the API key can be read (not the key)."""
    dist = find_distribution(args.package)
    site = str(dist.locate_file("")) if dist else None
    located = locate_package(args.package, dist)
    root = located.root
    record = _record_hashes(dist, set(args.paths)) if located.kind == "wheel" else {}
    files = {}
    for rel in args.paths:
        sha, unsafe = None, None
        try:
            full = safe_join(root, rel) if root else None
            sha = sha256_file(full) if full else None
        except OpFailed as exc:  # a symlink leading outside: check_plan refuses it
            unsafe = str(exc)
        files[rel] = FileFacts(sha256=sha, record_sha256=record.get(rel), unsafe=unsafe)
    probe = ctx.state_dir
    while not os.path.exists(probe):
        probe = os.path.dirname(probe) or "/"
    entries = read_journal(ctx)
    deploys = list(deploy_states(entries).values())
    return Facts(
        serve=_read_serve(args.serve_path),
        python=sys.version.split()[0],
        executable=sys.executable,
        hostname=os.uname().nodename,
        agent_pid=os.getpid(),
        site_packages=site,
        package_version=dist.version if dist else None,
        package_root=root,
        install_kind=located.kind,
        files=files,
        state_dir_free_bytes=shutil.disk_usage(probe).free,
        gpus=_gpus(),
        lock=read_lock(ctx),
        journal_tail=entries[-int(args.journal_lines) :],
        deploys=deploys[-50:],
        pending=[d for d in deploys if d.get("state") in UNFINISHED],
        backups=list_backups(ctx),
        user=_effective_user(),
        locate_error=located.error,
        api_key_error=read_api_key(args.api_key_file, args.api_key_env)[1],
        service_error=missing_units(args.units),
    )


def _effective_user():
    """Return the name of the user this agent runs as, or "#UID" when it has none."""
    try:
        return pwd.getpwuid(os.geteuid()).pw_name
    except KeyError:
        return "#%d" % os.geteuid()


def _record_hashes(dist, wanted):
    """Return {path: sha256 hex} from the distribution's RECORD for the wanted paths.

    Reads RECORD's CSV rows (path, algorithm=urlsafe-base64 digest, size) itself:
    `dist.files` makes a pathlib PackagePath of every row on every call, which for sglang's
    ~5,500 rows was most of the facts op (~0.1 s of each push's preflight).
    """
    text = dist.read_text("RECORD") if dist else None
    lines = (text or "").splitlines()
    # only rows that can name a wanted path go through csv (a path holding a comma is quoted)
    rows = [ln for ln in lines if ln.startswith('"') or ln.partition(",")[0] in wanted]
    record = {}
    for row in csv.reader(rows):
        if len(row) < 2 or row[0] not in wanted or "=" not in row[1]:
            continue
        value = row[1].partition("=")[2]
        record[row[0]] = base64.urlsafe_b64decode(value + "=" * (-len(value) % 4)).hex()
    return record


def _read_serve(path):
    """Return the serve file as found (ServeFound), or None when no path is given.

    Raises OpFailed(unsafe_path) for a relative path or one with `..`.
    """
    if not path:
        return None
    check_serve_path(path)
    try:
        with open(path, "rb") as fh:
            data = fh.read(SERVE_MAX_BYTES + 1)
    except FileNotFoundError:
        return ServeFound(path=path, sha256=None, text=None)
    except OSError as exc:
        return ServeFound(path=path, sha256=None, text=None, error=str(exc))
    text = data[:SERVE_MAX_BYTES].decode("utf-8", "replace")
    return ServeFound(path=path, sha256=sha256_bytes(data), text=text)


def _gpus():
    """Return the `GPU n: ...` lines of `nvidia-smi -L` ([] without nvidia-smi)."""
    exe = shutil.which("nvidia-smi")
    if not exe:
        return []
    try:
        out = subprocess.run(
            [exe, "-L"], capture_output=True, text=True, timeout=GPU_QUERY_TIMEOUT_S
        )
    except (OSError, subprocess.TimeoutExpired):
        return []
    return [line.strip() for line in out.stdout.splitlines() if line.startswith("GPU")]


def op_check_plan(ctx, args):
    """Return PlanResult (state per path), or refuse before locking: locked, unfinished
    deploy, wrong version, package not importable where it is installed, unreadable API key,
    unsafe path (also: a file to write whose owner this agent could not keep), drift.

    Nothing to do halts the request (ok, code `no_changes`) before the lock is taken, so an
    idempotent re-push costs one round trip. Needs the facts op earlier in the request.
    """
    facts = ctx.outputs[OpName.FACTS]
    held = facts.lock
    if held and held.get("run_id") != args.run_id and not args.break_lock:
        if held.get("expires_epoch", 0) >= time.time():  # a live run's deploy is not "pending"
            raise OpFailed(Code.LOCKED, "host locked by %s" % held.get("holder"), LockRefusal(held))
    pending = [d.get("deploy_id") for d in facts.pending]
    if pending:
        raise OpFailed(Code.PENDING_RECOVERY, "unfinished deploy %s: run `recover`" % pending[-1])
    if facts.package_version != args.target_version:
        raise OpFailed(
            Code.VERSION_MISMATCH,
            "installed %s is %s, patchset targets %s"
            % (args.package, facts.package_version, args.target_version),
        )
    if facts.locate_error:
        raise OpFailed(Code.PACKAGE_NOT_FOUND, facts.locate_error)
    if facts.api_key_error:
        raise OpFailed(Code.API_KEY_UNREADABLE, facts.api_key_error)
    if facts.service_error:  # before the install: a restart of it could only fail
        raise OpFailed(Code.SERVICE_NOT_FOUND, facts.service_error)
    unsafe = [f.unsafe for f in facts.files.values() if f.unsafe]
    if unsafe:
        raise OpFailed(Code.UNSAFE_PATH, "; ".join(unsafe))
    states = {}
    for spec in args.files:
        current = facts.files[spec.path].sha256
        states[spec.path] = classify_file(
            current, spec.base_sha256, spec.result_sha256, spec.upgrade_sha256
        )
    if args.serve:  # operator-owned config: any content is backed up, never "drifted"
        current = sha256_file(check_serve_path(args.serve.path))
        states[args.serve.path] = "unchanged" if current == args.serve.sha256 else "pending"
    drifted = sorted(p for p, st in states.items() if st == "drifted")
    if drifted:
        message = "base files differ from the lock: " + ", ".join(drifted)
        raise OpFailed(Code.DRIFT, message, {"files": states})
    if all(st == "unchanged" for st in states.values()):
        raise OpHalt(Code.NO_CHANGES, "already at the target result hashes", {"files": states})
    # A file that will be written must keep its owner (the serve file's path is absolute).
    changing = [p for p, st in states.items() if st != "unchanged"]
    root = facts.package_root or facts.site_packages
    check_owners([p if p.startswith("/") else safe_join(root, p) for p in changing])
    return PlanResult(files=states)


def op_lock_acquire(ctx, args):
    """Take the host lock; return a LockTaken (reentered: our own run held it already).

    Created atomically (O_EXCL); an expired or break_lock'd lock is replaced (the old record
    kept under "replaced"), but only while this agent holds the state dir's flock. Raises
    OpFailed: locked (held by a live run, or another agent works here),
    state_dir_unwritable (the record could not be written, e.g. a full disk).
    """
    ctx.ensure_state_dir()
    now = time.time()
    record = LockRecord(
        run_id=args.run_id,
        holder=args.holder,
        pid=args.pid,
        controller=args.controller,
        started=now_utc(),
        expires_epoch=now + float(args.ttl_s),
    )
    for _ in range(2):
        try:
            fd = os.open(ctx.lock_path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        except FileExistsError:
            held = read_lock(ctx) or LockRecord()
            if held.get("run_id") == args.run_id:
                return LockTaken(held, reentered=True)
            if args.break_lock or held.get("expires_epoch", 0) < now:
                if not ctx.flock_held:  # another agent works here: replacing could race it
                    message = "another agent is still working here; lock of %s kept" % (
                        held.get("holder"),
                    )
                    raise OpFailed(Code.LOCKED, message, LockRefusal(held)) from None
                os.unlink(ctx.lock_path)
                record["replaced"] = held
                continue
            message = "host locked by %s" % held.get("holder")
            raise OpFailed(Code.LOCKED, message, LockRefusal(held)) from None
        try:
            with os.fdopen(fd, "w") as fh:
                json.dump(record, fh)
                fh.flush()
                os.fsync(fh.fileno())
        except OSError as exc:  # full disk: leave no empty lock file behind
            os.unlink(ctx.lock_path)
            message = "cannot write %s: %s" % (ctx.lock_path, exc)
            raise OpFailed(Code.STATE_DIR_UNWRITABLE, message) from None
        return LockTaken(record)
    raise OpFailed(Code.LOCKED, "lock contended", LockRefusal(read_lock(ctx)))


def op_lock_release(ctx, args):
    """Drop the lock if this run holds it; return a LockReleased (with the lock left in
    place when it is not ours)."""
    held = read_lock(ctx)
    if held and held.get("run_id") == args.run_id:
        os.unlink(ctx.lock_path)
        return LockReleased(True)
    return LockReleased(False, held)


def op_journal(ctx, args):
    """Append args.entry, stamped with `ts` (UTC), to the journal, first rotating a journal
    grown past its bound (state.rotate_journal; only while this agent holds the state dir's
    flock); return a JournalAppended (the entry; the entries carried or None; why the
    rotation failed or None). A rotation that fails is only reported: the entry still
    goes into the old journal, as it always could. Raises OSError when the entry cannot
    be written."""
    ctx.ensure_state_dir()
    rotated, rotate_error = None, None
    if ctx.flock_held:
        try:
            rotated = rotate_journal(ctx)
        except OSError as exc:
            rotate_error = str(exc)
    entry = dict(args.entry, ts=now_utc())
    append_line(ctx.journal_path, entry)
    return JournalAppended(entry, rotated, rotate_error)
