"""The ddtree-deploy agent: run by the host's own python, stdlib only, one file.

The controller sends this source, then one JSON request per line on stdin; for each, the
agent runs the request's ops in order, stops at the first failed op, and prints one JSON
answer between sentinel lines (so login-shell noise cannot be mistaken for protocol). One
agent process serves every request of a command, so a request costs one round trip. Every write is
temp file + fsync + os.replace, and SIGHUP is ignored so an install completes even when
the SSH channel drops mid-call. This module is also imported by the controller for
`apply_unified_diff`, so the lock and the host compute results with the same code.
"""

import base64
import datetime
import hashlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

AGENT_VERSION = 1
BEGIN = "<<<DDTREE-AGENT-BEGIN>>>"
END = "<<<DDTREE-AGENT-END>>>"
UNFINISHED = ("installing", "rollback_failed")
_HUNK = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")


class OpFailed(Exception):
    """An expected failure of one op; `code` is machine-readable, data travels back."""

    def __init__(self, code, message, data=None):
        super().__init__(message)
        self.code, self.data = code, data or {}


class OpHalt(OpFailed):
    """The op succeeded and nothing further is needed: later ops are skipped, the request
    stays ok (see agent/host/wire.py)."""


# --- pure helpers (also used by the controller) -------------------------------------


def sha256_bytes(data):
    return hashlib.sha256(data).hexdigest()


def sha256_file(path):
    try:
        with open(path, "rb") as fh:
            return sha256_bytes(fh.read())
    except FileNotFoundError:
        return None


def classify_file(current, base, result, upgrades=()):
    """Where one file stands: "unchanged" (at result), "pending" (at the pinned base),
    "upgrade" (at another locked version of the same patchset), or "drifted"."""
    if current == result:
        return "unchanged"
    if current == base:
        return "pending"
    if current in upgrades:
        return "upgrade"
    return "drifted"


def apply_unified_diff(base_text, diff_text):
    """Apply a one-file unified diff exactly: no fuzz, no offset; raises ValueError."""
    old = base_text.splitlines(keepends=True)
    out, pos, lines, i = [], 0, diff_text.splitlines(keepends=True), 0
    while i < len(lines) and not lines[i].startswith("@@"):
        i += 1
    if i == len(lines):
        raise ValueError("diff has no hunks")
    while i < len(lines):
        match = _HUNK.match(lines[i])
        if not match:
            raise ValueError(f"diff line {i + 1}: expected a hunk header, got {lines[i]!r}")
        start = int(match.group(1)) - (0 if match.group(2) == "0" else 1)
        if start < pos:
            raise ValueError(f"diff line {i + 1}: hunks overlap or are out of order")
        out.extend(old[pos:start])
        pos, i = start, i + 1
        prev = ""
        while i < len(lines) and not lines[i].startswith("@@"):
            line = lines[i]
            tag, body = line[:1], line[1:]
            if tag == "\\":  # "\ No newline at end of file" applies to the previous line
                if prev in (" ", "+") and out:
                    out[-1] = out[-1].rstrip("\r\n")
            elif tag in (" ", "-"):
                if pos >= len(old) or old[pos].rstrip("\r\n") != body.rstrip("\r\n"):
                    got = old[pos] if pos < len(old) else "<end of file>"
                    raise ValueError(
                        f"does not apply at base line {pos + 1}: expected {body.rstrip()!r}, "
                        f"found {got.rstrip()!r}"
                    )
                if tag == " ":
                    out.append(old[pos])
                pos += 1
            elif tag == "+":
                out.append(body if body.endswith("\n") else body + "\n")
            elif line.strip():
                raise ValueError(f"diff line {i + 1}: unexpected {line.rstrip()!r}")
            prev = tag
            i += 1
    out.extend(old[pos:])
    return "".join(out)


def _now():
    return datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")


# --- durable file primitives ----------------------------------------------------------


def _fsync_dir(path):
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_atomic(path, data, mode=0o644):
    """Write bytes to a temp file in the same directory, fsync, then os.replace."""
    directory = os.path.dirname(path)
    os.makedirs(directory, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".ddtree-", dir=directory)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    _fsync_dir(directory)


def append_line(path, record):
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    try:
        os.write(fd, (json.dumps(record, sort_keys=True) + "\n").encode())
        os.fsync(fd)
    finally:
        os.close(fd)


def clear_pycache(path):
    """Remove cached bytecode of one module so Python cannot run a stale .pyc."""
    directory, name = os.path.split(path)
    stem = name[:-3] if name.endswith(".py") else name
    cache = os.path.join(directory, "__pycache__")
    removed = []
    if os.path.isdir(cache):
        for entry in os.listdir(cache):
            if entry.startswith(stem + ".") and entry.endswith((".pyc", ".pyo")):
                os.unlink(os.path.join(cache, entry))
                removed.append(entry)
    return removed


def _safe_join(root, rel):
    """root/rel, refusing absolute paths, `..`, and symlinks that lead outside root."""
    if rel.startswith("/") or ".." in rel.split("/") or "\x00" in rel:
        raise OpFailed("unsafe_path", f"refusing path {rel!r}")
    full = os.path.join(root, rel)
    real_root = os.path.realpath(root)
    if os.path.commonpath([os.path.realpath(full), real_root]) != real_root:
        raise OpFailed("unsafe_path", f"{rel!r} resolves outside {root} (symlink?)")
    return full


# --- host state ----------------------------------------------------------------------


class Ctx:
    """What every op may read: the request and derived state-dir paths."""

    def __init__(self, request):
        self.request = request
        self.state_dir = request["state_dir"]
        self.lock_path = os.path.join(self.state_dir, "lock")
        self.journal_path = os.path.join(self.state_dir, "journal.jsonl")
        self.backups_dir = os.path.join(self.state_dir, "backups")
        self.outputs = {}  # op name -> data of ops already run in this request

    def ensure_state_dir(self):
        os.makedirs(self.backups_dir, mode=0o700, exist_ok=True)
        os.chmod(self.state_dir, 0o700)
        os.chmod(self.backups_dir, 0o700)


def read_journal(ctx):
    entries = []
    try:
        with open(ctx.journal_path, encoding="utf-8") as fh:
            for line in fh:
                if line.strip():
                    try:
                        entries.append(json.loads(line))
                    except ValueError:
                        entries.append({"state": "corrupt", "raw": line[:200]})
    except FileNotFoundError:
        pass
    return entries


def deploy_states(entries):
    """deploy_id -> its latest journal entry, in first-seen order."""
    latest = {}
    for entry in entries:
        if "deploy_id" in entry:
            latest.pop(entry["deploy_id"], None)
            latest[entry["deploy_id"]] = entry
    return latest


def read_lock(ctx):
    try:
        with open(ctx.lock_path, encoding="utf-8") as fh:
            return json.load(fh)
    except FileNotFoundError:
        return None
    except ValueError:
        return {"holder": "unreadable lock file", "expires_epoch": 0}


def find_distribution(name):
    import importlib.metadata as md

    try:
        return md.distribution(name)
    except md.PackageNotFoundError:
        return None


# --- ops -----------------------------------------------------------------------------


def op_facts(ctx, args):
    """Python, installed package version, hashes of given paths, disk, GPUs, lock, journal."""
    dist = find_distribution(args.get("package", "sglang"))
    site = str(dist.locate_file("")) if dist else None
    record = {}
    if dist and dist.files:
        wanted = set(args.get("paths", []))
        for f in dist.files:
            if str(f) in wanted and f.hash:
                raw = base64.urlsafe_b64decode(f.hash.value + "=" * (-len(f.hash.value) % 4))
                record[str(f)] = raw.hex()
    files = {}
    for rel in args.get("paths", []):
        entry = {"sha256": None, "record_sha256": record.get(rel)}
        try:
            full = _safe_join(site, rel) if site else None
            entry["sha256"] = sha256_file(full) if full else None
        except OpFailed as exc:  # a symlink leading outside: check_plan refuses it
            entry["unsafe"] = str(exc)
        files[rel] = entry
    probe = ctx.state_dir
    while not os.path.exists(probe):
        probe = os.path.dirname(probe) or "/"
    entries = read_journal(ctx)
    pending = [d for d in deploy_states(entries).values() if d.get("state") in UNFINISHED]
    return {
        "serve": _read_serve(args.get("serve_path")),
        "python": sys.version.split()[0],
        "executable": sys.executable,
        "hostname": os.uname().nodename,
        "agent_pid": os.getpid(),
        "site_packages": site,
        "package_version": dist.version if dist else None,
        "files": files,
        "state_dir_free_bytes": shutil.disk_usage(probe).free,
        "gpus": _gpus(),
        "lock": read_lock(ctx),
        "journal_tail": entries[-int(args.get("journal_lines", 5)) :],
        "deploys": list(deploy_states(entries).values())[-50:],
        "pending": pending,
        "backups": _list_backups(ctx),
    }


SERVE_MAX_BYTES = 65536


def _check_serve_path(path):
    if not path.startswith("/") or ".." in path.split("/") or "\x00" in path:
        raise OpFailed("unsafe_path", "refusing serve file path %r" % path)
    return path


def _read_serve(path):
    """The serve file as found: {path, sha256, text} (text None when absent), or None."""
    if not path:
        return None
    _check_serve_path(path)
    try:
        with open(path, "rb") as fh:
            data = fh.read(SERVE_MAX_BYTES + 1)
    except FileNotFoundError:
        return {"path": path, "sha256": None, "text": None}
    except OSError as exc:
        return {"path": path, "sha256": None, "text": None, "error": str(exc)}
    return {
        "path": path,
        "sha256": sha256_bytes(data),
        "text": data[:SERVE_MAX_BYTES].decode("utf-8", "replace"),
    }


def _gpus():
    exe = shutil.which("nvidia-smi")
    if not exe:
        return []
    try:
        out = subprocess.run([exe, "-L"], capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired):
        return []
    return [line.strip() for line in out.stdout.splitlines() if line.startswith("GPU")]


def op_check_plan(ctx, args):
    """Refuse before locking: wrong version, unfinished deploy, drift; or nothing to do.

    Nothing to do halts the request (ok, code `no_changes`) before the lock is taken, so an
    idempotent re-push costs one round trip.
    """
    facts = ctx.outputs["facts"]  # the facts op runs first in the same request
    held = facts["lock"]
    if held and held.get("run_id") != args.get("run_id") and not args.get("break_lock"):
        if held.get("expires_epoch", 0) >= time.time():  # a live run's deploy is not "pending"
            raise OpFailed("locked", f"host locked by {held.get('holder')}", {"lock": held})
    pending = [d.get("deploy_id") for d in facts["pending"]]
    if pending:
        raise OpFailed("pending_recovery", "unfinished deploy %s: run `recover`" % pending[-1])
    if facts["package_version"] != args["target_version"]:
        raise OpFailed(
            "version_mismatch",
            "installed %s is %s, patchset targets %s"
            % (args["package"], facts["package_version"], args["target_version"]),
        )
    unsafe = [f["unsafe"] for f in facts["files"].values() if f.get("unsafe")]
    if unsafe:
        raise OpFailed("unsafe_path", "; ".join(unsafe))
    states = {}
    for spec in args["files"]:
        current = facts["files"][spec["path"]]["sha256"]
        states[spec["path"]] = classify_file(
            current, spec["base_sha256"], spec["result_sha256"], spec.get("upgrade_sha256", ())
        )
    serve = args.get("serve")
    if serve:  # operator-owned config: any content is backed up, never "drifted"
        current = sha256_file(_check_serve_path(serve["path"]))
        states[serve["path"]] = "unchanged" if current == serve["sha256"] else "pending"
    drifted = sorted(p for p, st in states.items() if st == "drifted")
    if drifted:
        raise OpFailed(
            "drift", "base files differ from the lock: " + ", ".join(drifted), {"files": states}
        )
    if all(st == "unchanged" for st in states.values()):
        raise OpHalt("no_changes", "already at the target result hashes", {"files": states})
    return {"files": states}


def op_lock_acquire(ctx, args):
    """Create the lock atomically (O_EXCL); an expired or --break-lock'd one is replaced."""
    ctx.ensure_state_dir()
    now = time.time()
    record = {
        "run_id": args["run_id"],
        "holder": args["holder"],
        "pid": args.get("pid"),
        "controller": args.get("controller"),
        "started": _now(),
        "expires_epoch": now + float(args.get("ttl_s", 3600)),
    }
    for _ in range(2):
        try:
            fd = os.open(ctx.lock_path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        except FileExistsError:
            held = read_lock(ctx) or {}
            if held.get("run_id") == args["run_id"]:
                return {"lock": held, "reentered": True}
            if args.get("break_lock") or held.get("expires_epoch", 0) < now:
                os.unlink(ctx.lock_path)
                record["replaced"] = held
                continue
            raise OpFailed(
                "locked", f"host locked by {held.get('holder')}", {"lock": held}
            ) from None
        try:
            with os.fdopen(fd, "w") as fh:
                json.dump(record, fh)
                fh.flush()
                os.fsync(fh.fileno())
        except OSError as exc:  # full disk: leave no empty lock file behind
            os.unlink(ctx.lock_path)
            raise OpFailed("state_dir_unwritable", f"cannot write {ctx.lock_path}: {exc}") from None
        return {"lock": record}
    raise OpFailed("locked", "lock contended", {"lock": read_lock(ctx)})


def op_lock_release(ctx, args):
    held = read_lock(ctx)
    if held and held.get("run_id") == args["run_id"]:
        os.unlink(ctx.lock_path)
        return {"released": True}
    return {"released": False, "lock": held}


def op_journal(ctx, args):
    ctx.ensure_state_dir()
    entry = dict(args["entry"], ts=_now())
    append_line(ctx.journal_path, entry)
    return {"entry": entry}


def op_backup(ctx, args):
    """Copy originals (or note their absence) under backups/<deploy-id>, then verify.

    Every directory of the backup is 0700 and every file 0600 (umask 077 while it runs:
    makedirs applies its mode to the last directory only).
    """
    umask = os.umask(0o077)
    try:
        return _backup(ctx, args)
    finally:
        os.umask(umask)


def _backup(ctx, args):
    ctx.ensure_state_dir()
    site, deploy_id = args["site_packages"], args["deploy_id"]
    root = os.path.join(ctx.backups_dir, deploy_id)
    os.makedirs(os.path.join(root, "files"), mode=0o700)
    manifest = {
        "deploy_id": deploy_id,
        "created": _now(),
        "site_packages": site,
        "patchset": args.get("patchset"),
        "files": {},
    }
    for rel in args["paths"]:
        full = _safe_join(site, rel)
        if not os.path.exists(full):
            manifest["files"][rel] = {"existed": False}
            continue
        with open(full, "rb") as fh:
            data = fh.read()
        write_atomic(os.path.join(root, "files", rel), data, 0o600)
        mode = os.stat(full).st_mode & 0o7777
        manifest["files"][rel] = {"existed": True, "sha256": sha256_bytes(data), "mode": mode}
    if args.get("serve_path"):
        manifest["serve"] = _backup_serve(root, _check_serve_path(args["serve_path"]))
    write_atomic(os.path.join(root, "manifest.json"), json.dumps(manifest).encode(), 0o600)
    _verify_backup(root, manifest)
    return {"backup": root, "files": len(manifest["files"])}


def _backup_serve(root, path):
    """Copy the serve file to <backup>/serve; return its manifest entry."""
    if not os.path.exists(path):
        return {"path": path, "existed": False}
    with open(path, "rb") as fh:
        data = fh.read()
    write_atomic(os.path.join(root, "serve"), data, 0o600)
    mode = os.stat(path).st_mode & 0o7777
    return {"path": path, "existed": True, "sha256": sha256_bytes(data), "mode": mode}


def _check_backup(ctx, deploy_id, paths, serve_path=None):
    """Raise OpFailed unless backups/<deploy_id> has a manifest covering paths, verified."""
    root = os.path.join(ctx.backups_dir, deploy_id)
    try:
        with open(os.path.join(root, "manifest.json"), encoding="utf-8") as fh:
            manifest = json.load(fh)
    except (OSError, ValueError) as exc:
        raise OpFailed("backup_corrupt", f"backup {deploy_id} unreadable: {exc}") from None
    missing = sorted(set(paths) - set(manifest["files"]))
    if serve_path and (manifest.get("serve") or {}).get("path") != serve_path:
        missing.append(serve_path)
    if missing:
        raise OpFailed("backup_corrupt", f"backup {deploy_id} lacks {', '.join(missing)}")
    _verify_backup(root, manifest)


def _verify_backup(root, manifest):
    for rel, info in manifest["files"].items():
        if info["existed"] and sha256_file(os.path.join(root, "files", rel)) != info["sha256"]:
            raise OpFailed("backup_corrupt", f"backup copy of {rel} does not match its manifest")
    serve = manifest.get("serve")
    if serve and serve["existed"] and sha256_file(os.path.join(root, "serve")) != serve["sha256"]:
        raise OpFailed("backup_corrupt", "backup copy of %s does not match" % serve["path"])


def op_install(ctx, args):
    """Compute every new file, check it against the lock, then replace files atomically."""
    site, planned, serve = args["site_packages"], [], args.get("serve")
    if args.get("deploy_id"):  # the backup must still be good before the first write
        paths = [spec["path"] for spec in args["files"]]
        _check_backup(ctx, args["deploy_id"], paths, serve and serve["path"])
    for spec in args["files"]:
        full = _safe_join(site, spec["path"])
        current = sha256_file(full)
        if current == spec["result_sha256"]:
            continue
        if current != spec.get("base_sha256") and current not in spec.get("upgrade_sha256", ()):
            raise OpFailed("drift", f"{spec['path']}: base changed since preflight")
        if "diff" in spec:
            with open(full, encoding="utf-8", newline="") as fh:
                base_text = fh.read()
            try:
                data = apply_unified_diff(base_text, spec["diff"]).encode("utf-8")
            except ValueError as exc:
                raise OpFailed("patch_failed", f"{spec['path']}: {exc}") from None
        else:
            data = base64.b64decode(spec["content_b64"])
        if sha256_bytes(data) != spec["result_sha256"]:
            raise OpFailed("result_mismatch", f"{spec['path']}: result sha256 differs from lock")
        planned.append((full, spec["path"], data))
    for full, _rel, data in planned:
        mode = os.stat(full).st_mode & 0o7777 if os.path.exists(full) else 0o644
        write_atomic(full, data, mode)
        clear_pycache(full)
    if serve and sha256_file(_check_serve_path(serve["path"])) != serve["sha256"]:
        data = base64.b64decode(serve["content_b64"])
        if sha256_bytes(data) != serve["sha256"]:
            raise OpFailed("result_mismatch", "%s: content differs from its sha256" % serve["path"])
        path = serve["path"]
        # A new serve file may hold an api key: owner-only unless one existed before.
        mode = os.stat(path).st_mode & 0o7777 if os.path.exists(path) else 0o600
        write_atomic(path, data, mode)
        planned.append((path, path, data))
    wrong = [rel for full, rel, data in planned if sha256_file(full) != sha256_bytes(data)]
    if wrong:
        raise OpFailed("verify_failed", "installed files differ from lock", {"files": wrong})
    return {"installed": [rel for _, rel, _ in planned]}


def op_compile(ctx, args):
    import py_compile

    errors = {}
    for rel in args["paths"]:
        full = _safe_join(args["site_packages"], rel)
        try:
            py_compile.compile(full, doraise=True)
        except py_compile.PyCompileError as exc:
            errors[rel] = str(exc.msg).strip()[-2000:]
    if errors:
        raise OpFailed("compile_failed", "py_compile failed: " + ", ".join(errors), errors)
    return {"compiled": len(args["paths"])}


def op_restore(ctx, args):
    """Put every file of a backup back (or remove it if it did not exist), then verify.

    A file already at its original bytes is left alone, so a restore after a failure that
    changed nothing needs no free space and no write access. Each backup copy is checked
    against the manifest before it is written back.
    """
    root = os.path.join(ctx.backups_dir, args["deploy_id"])
    try:
        with open(os.path.join(root, "manifest.json"), encoding="utf-8") as fh:
            manifest = json.load(fh)
    except FileNotFoundError:
        raise OpFailed("no_backup", f"no backup {args['deploy_id']}") from None
    except (OSError, ValueError) as exc:
        raise OpFailed("backup_unreadable", f"backup {args['deploy_id']}: {exc}") from None
    site, states = manifest["site_packages"], {}
    for rel, info in manifest["files"].items():
        full = _safe_join(site, rel)
        wanted = info["sha256"] if info["existed"] else None
        if sha256_file(full) == wanted:
            states[rel] = "restored"
            continue
        try:
            if info["existed"]:
                with open(os.path.join(root, "files", rel), "rb") as fh:
                    data = fh.read()
                if sha256_bytes(data) != wanted:
                    states[rel] = "backup copy corrupt"
                    continue
                write_atomic(full, data, info["mode"])
            else:
                os.unlink(full)
            try:
                clear_pycache(full)
            except OSError:
                pass  # a stale .pyc is ignored by Python: its source mtime/size no longer match
            states[rel] = "restored" if sha256_file(full) == wanted else "differs from backup"
        except OSError as exc:
            states[rel] = f"error: {exc}"
    if manifest.get("serve"):
        states[manifest["serve"]["path"]] = _restore_serve(root, manifest["serve"])
    bad = {rel: s for rel, s in states.items() if s != "restored"}
    if bad:
        raise OpFailed("restore_failed", "some files were not restored", {"files": states})
    return {"files": states, "backup": root}


def _restore_serve(root, info):
    """Put the serve file back as the backup has it (or remove it); return its state."""
    path = _check_serve_path(info["path"])
    wanted = info.get("sha256") if info["existed"] else None
    if sha256_file(path) == wanted:
        return "restored"
    try:
        if info["existed"]:
            with open(os.path.join(root, "serve"), "rb") as fh:
                data = fh.read()
            if sha256_bytes(data) != wanted:
                return "backup copy corrupt"
            write_atomic(path, data, info["mode"])
        else:
            os.unlink(path)
    except OSError as exc:
        return f"error: {exc}"
    return "restored" if sha256_file(path) == wanted else "differs from backup"


def _run(argv, timeout_s):
    try:
        done = subprocess.run(
            argv, capture_output=True, text=True, timeout=timeout_s, stdin=subprocess.DEVNULL
        )
        return done.returncode, (done.stdout + done.stderr)[-4000:]
    except FileNotFoundError:
        return 127, f"command not found: {argv[0]}"
    except subprocess.TimeoutExpired:
        return 124, f"timed out after {timeout_s}s: {argv[0]}"


def _service_log(service):
    if service["kind"] == "systemd":
        return _run(["journalctl", "-u", service["unit"], "-n", "50", "--no-pager"], 30)[1]
    if service.get("log_file"):
        try:
            with open(service["log_file"], encoding="utf-8", errors="replace") as fh:
                return "".join(fh.readlines()[-50:])
        except OSError as exc:
            return f"cannot read {service['log_file']}: {exc}"
    return ""


def op_restart(ctx, args):
    """Restart the service: systemctl restart + is-active, or stop/start/status argv."""
    service = args["service"]
    if service["kind"] == "systemd":
        steps = [
            ["systemctl", "restart", service["unit"]],
            ["systemctl", "is-active", service["unit"]],
        ]
    elif service["kind"] == "command":
        steps = [service["stop"], service["start"]] + (
            [service["status"]] if service.get("status") else []
        )
    else:
        return {"skipped": True}
    for argv in steps:
        rc, output = _run(argv, args.get("timeout_s", 300))
        if rc != 0:
            raise OpFailed(
                "restart_failed",
                f"{' '.join(argv)} exited {rc}",
                {"output": output, "log": _service_log(service)},
            )
    return {"restarted": True}


def op_health(ctx, args):
    """Poll health_url from the host until HTTP 200 or ready_timeout_s."""
    import urllib.error  # here, not at the top: it costs tens of ms on every other request
    import urllib.request

    service = args["service"]
    if service["kind"] == "none" and not args.get("force"):
        return {"skipped": True}
    deadline = time.monotonic() + float(service["ready_timeout_s"])
    last, polls = "no answer yet", 0
    while True:
        polls += 1
        try:
            with urllib.request.urlopen(service["health_url"], timeout=10) as resp:
                if resp.status == 200:
                    return {"healthy": True, "polls": polls}
                last = f"HTTP {resp.status}"
        except urllib.error.HTTPError as exc:
            last = f"HTTP {exc.code}"
        except (OSError, ValueError) as exc:
            last = str(getattr(exc, "reason", exc))
        if time.monotonic() >= deadline:
            raise OpFailed(
                "unhealthy",
                f"{service['health_url']} not ready after "
                f"{service['ready_timeout_s']}s (last: {last})",
                {"log": _service_log(service)},
            )
        if _service_exited(service, polls):
            raise OpFailed(
                "unhealthy",
                f"the service exited while starting ({' '.join(service['status'])} says "
                f"stopped; {service['health_url']} last: {last})",
                {"log": _service_log(service)},
            )
        time.sleep(float(service.get("poll_interval_s", 1.0)))


STATUS_EVERY_POLLS = 5


def _service_exited(service, polls):
    """For a `command` service with a status command, every few polls: True when it says
    the server is not running, so a server that crashed while starting fails health at once
    instead of after ready_timeout_s."""
    if service.get("kind") != "command" or not service.get("status"):
        return False
    if polls % STATUS_EVERY_POLLS:
        return False
    return _run(service["status"], 30)[0] != 0


def op_smoke(ctx, args):
    """Run each suite script with this python; each prints one JSON line."""
    work = os.path.join(ctx.state_dir, "smoke")
    os.makedirs(work, mode=0o700, exist_ok=True)
    for name, source in args.get("support", {}).items():  # modules the scripts import
        write_atomic(os.path.join(work, os.path.basename(name)), source.encode(), 0o600)
    results = []
    for suite in args["suites"]:
        script = os.path.join(work, f"{suite['name']}.py")
        write_atomic(script, suite["source"].encode(), 0o600)
        started = time.monotonic()
        try:
            done = subprocess.run(
                [sys.executable, script],
                input=json.dumps(suite["input"]),
                capture_output=True,
                text=True,
                timeout=suite.get("timeout_s", 600),
                # no world-readable __pycache__ in the 0700 state dir, no .pyc in site-packages
                env=dict(os.environ, PYTHONDONTWRITEBYTECODE="1"),
            )
            lines = [ln for ln in done.stdout.splitlines() if ln.startswith("{")]
            result = json.loads(lines[-1]) if lines else None
            if not isinstance(result, dict):
                result = {
                    "passed": False,
                    "details": "no JSON result line; stderr: " + done.stderr[-1500:],
                }
        except subprocess.TimeoutExpired:
            result = {"passed": False, "details": f"timed out after {suite.get('timeout_s')}s"}
        except ValueError as exc:
            result = {"passed": False, "details": f"unreadable result line: {exc}"}
        result.setdefault("suite", suite["name"])
        result.setdefault("duration_s", round(time.monotonic() - started, 3))
        results.append(result)
    failed = [_why_failed(r) for r in results if not r.get("passed") and not r.get("skipped")]
    if failed:
        raise OpFailed("smoke_failed", "smoke failed: " + "; ".join(failed), {"suites": results})
    return {"suites": results}


def _why_failed(result):
    """`suite: first failed check: first line of its detail` (what a summary shows)."""
    checks = [c for c in result.get("checks") or [] if not c.get("passed")]
    if not checks:
        return "%s: %s" % (result.get("suite"), str(result.get("details") or "failed")[:200])
    lines = str(checks[0].get("detail") or "").strip().splitlines() or [""]
    return "%s: %s: %s" % (result.get("suite"), checks[0].get("name"), lines[0][:200])


def _list_backups(ctx):
    found = []
    if os.path.isdir(ctx.backups_dir):
        for name in sorted(os.listdir(ctx.backups_dir)):
            try:
                with open(os.path.join(ctx.backups_dir, name, "manifest.json")) as fh:
                    manifest = json.load(fh)
            except (OSError, ValueError):
                manifest = {"created": None, "patchset": None, "broken": True}
            found.append(
                {
                    "deploy_id": name,
                    "created": manifest.get("created"),
                    "patchset": manifest.get("patchset"),
                    "broken": manifest.get("broken", False),
                }
            )
    return found


def op_prune(ctx, args):
    """Keep the newest `keep` backups; never one whose deploy is still `installing`."""
    states = deploy_states(read_journal(ctx))
    backups = _list_backups(ctx)  # deploy ids sort by time: they start with a UTC stamp
    removable = [b for b in backups if states.get(b["deploy_id"], {}).get("state") != "installing"]
    keep = int(args.get("keep", 5))
    doomed = removable[: max(0, len(removable) - keep)]
    for b in doomed:
        shutil.rmtree(os.path.join(ctx.backups_dir, b["deploy_id"]))
    return {
        "removed": [b["deploy_id"] for b in doomed],
        "kept": [b["deploy_id"] for b in backups if b not in doomed],
    }


OPS = {
    "facts": op_facts,
    "check_plan": op_check_plan,
    "lock_acquire": op_lock_acquire,
    "lock_release": op_lock_release,
    "journal": op_journal,
    "backup": op_backup,
    "install": op_install,
    "compile": op_compile,
    "restore": op_restore,
    "restart": op_restart,
    "health": op_health,
    "smoke": op_smoke,
    "prune": op_prune,
}


# Ops that only read (facts, check_plan) or are atomic on their own (lock_acquire) wait a
# short while for the host's agent lock; every other op waits for it as long as a run may.
_READ_ONLY = {"facts"}
_QUICK = {"facts", "check_plan", "lock_acquire"}
QUICK_WAIT_S, EXCLUSIVE_WAIT_S = 1.0, 3600.0


def _hold_agent_lock(request):
    """Serialise the requests that change a host: flock on the state dir itself.

    An agent whose SSH channel dropped keeps running (SIGHUP is ignored); the controller's
    rollback over a fresh connection must not overtake it, or the orphan's install could land
    after the restore. The lock is taken on the directory, so a refused preflight writes
    nothing. Returns (fd or None, note): None when the request only reads, when there is no
    state dir yet for a quick request, or when a quick request gave up waiting.
    """
    import fcntl

    names = {op["op"] for op in request["ops"]}
    if names <= _READ_ONLY:
        return None, "read-only"
    quick = names <= _QUICK
    try:
        if not quick:
            os.makedirs(request["state_dir"], mode=0o700, exist_ok=True)
        fd = os.open(request["state_dir"], os.O_RDONLY | os.O_DIRECTORY)
    except OSError as exc:
        return None, f"unavailable: {exc}"
    deadline = time.monotonic() + (QUICK_WAIT_S if quick else EXCLUSIVE_WAIT_S)
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return fd, "held"
        except BlockingIOError:
            if time.monotonic() >= deadline:
                os.close(fd)
                return None, "busy"
            time.sleep(0.05)


def handle(request):
    """Run ops in order; stop at the first failure; errors come back as data."""
    if request.get("agent_version") != AGENT_VERSION:
        return {"ok": False, "results": [], "error": "agent version mismatch"}
    fd, note = _hold_agent_lock(request)
    if note == "busy" and not set(op["op"] for op in request["ops"]) <= _QUICK:
        return {"ok": False, "results": [], "error": "another agent is still working here"}
    try:
        return _run_ops(request)
    finally:
        if fd is not None:
            os.close(fd)


def _run_ops(request):
    ctx, results = Ctx(request), []
    for op in request["ops"]:
        started = time.monotonic()
        entry = {"op": op["op"], "ok": True, "data": None, "error": None, "code": None}
        try:
            entry["data"] = OPS[op["op"]](ctx, op.get("args", {}))
        except OpHalt as exc:
            entry.update(halt=True, note=str(exc), code=exc.code, data=exc.data)
        except OpFailed as exc:
            entry.update(ok=False, error=str(exc), code=exc.code, data=exc.data)
        except Exception as exc:  # noqa: BLE001 - anything else still comes back as data
            import traceback

            entry.update(
                ok=False,
                error=f"{type(exc).__name__}: {exc}",
                code="exception",
                data={"traceback": traceback.format_exc()[-3000:]},
            )
        entry["duration_s"] = round(time.monotonic() - started, 4)
        ctx.outputs[op["op"]] = entry["data"]
        results.append(entry)
        if not entry["ok"] or entry.get("halt"):
            break
    return {"ok": all(r["ok"] for r in results), "results": results}


def main():
    """Answer one request per stdin line until EOF: one agent process serves a whole push."""
    signal.signal(signal.SIGHUP, signal.SIG_IGN)  # finish the work if the channel drops
    for line in sys.stdin:
        if not line.strip():
            continue
        answer = json.dumps(handle(json.loads(line)))
        try:
            sys.stdout.write(f"{BEGIN}\n{answer}\n{END}\n")
            sys.stdout.flush()
        except (BrokenPipeError, OSError):
            return  # the controller is gone; the work above is done and journaled


if __name__ == "__main__":
    main()
