"""The ops that change files in site-packages: backup, install, restore, prune."""

import base64
import json
import os
import shutil

from .drift import describe_drift, find_drift, read_manifest, save_drifted
from .files import (
    check_owners,
    check_serve_path,
    clear_pycache,
    now_utc,
    owner_of,
    safe_join,
    safe_mode,
    write_atomic,
)
from .private import open_private, private_sha256
from .pure import apply_unified_diff, sha256_bytes, sha256_file, split_backups
from .restore_check import check_manifest
from .state import deploy_states, list_backups, read_journal
from .wire import Code, JournalState, OpFailed
from .wire_outcomes import DriftRefusal, InstallResult, Pruned, Restored, RestoreFailure
from .wire_results import BackupResult


def op_backup(ctx, args):
    """Copy the originals (or note their absence) under backups/<deploy_id>, verify the
    copies, and return BackupResult.

    Every directory of the backup is 0700 and every file 0600 (umask 077 while it runs:
    makedirs applies its mode to the last directory only). `args.results` (path -> the
    sha256 the install will write) goes into the manifest, for drift.py. A backup that
    fails part-way is removed. Raises OpFailed (unsafe_path, backup_corrupt) and OSError
    (an existing backup dir, a full disk).
    """
    umask = os.umask(0o077)
    try:
        ctx.ensure_state_dir()
        root = os.path.join(ctx.backups_dir, args.deploy_id)
        os.makedirs(os.path.join(root, "files"), mode=0o700)  # raises when it exists: not ours
        try:
            return _backup(args, root)
        except BaseException:
            # A partial backup (a full disk) is no backup: leave none that `backups list`,
            # prune or rollback could take for one. Best effort: removing frees space.
            shutil.rmtree(root, ignore_errors=True)
            raise
    finally:
        os.umask(umask)


def _backup(args, root):
    """op_backup's copies and manifest under `root` (made, empty)."""
    site, results = args.site_packages, args.results
    manifest = {
        "deploy_id": args.deploy_id,
        "created": now_utc(),
        "site_packages": site,
        "patchset": args.patchset,
        "files": {},
    }
    for rel in args.paths:
        full = safe_join(site, rel)
        result = {"result_sha256": results[rel]} if rel in results else {}  # drift.py reads it
        if not os.path.exists(full):
            manifest["files"][rel] = dict(result, existed=False)
            continue
        with open(full, "rb") as fh:
            data = fh.read()
        write_atomic(os.path.join(root, "files", rel), data, 0o600)
        manifest["files"][rel] = dict(_meta(full), existed=True, sha256=sha256_bytes(data))
        manifest["files"][rel].update(result)
    if args.serve_path:
        manifest["serve"] = _backup_serve(root, check_serve_path(args.serve_path))
        if args.serve_path in results:
            manifest["serve"]["result_sha256"] = results[args.serve_path]
    write_atomic(os.path.join(root, "manifest.json"), json.dumps(manifest).encode(), 0o600)
    _verify_backup(root, manifest)
    return BackupResult(backup=root, files=len(manifest["files"]))


def _backup_serve(root, path):
    """Copy the serve file to <backup>/serve; return its manifest entry."""
    if not os.path.exists(path):
        return {"path": path, "existed": False}
    with open(path, "rb") as fh:
        data = fh.read()
    write_atomic(os.path.join(root, "serve"), data, 0o600)
    return dict(_meta(path), path=path, existed=True, sha256=sha256_bytes(data))


def _meta(path):
    """Return {mode, uid, gid} of the file at `path`: what a restore gives it back (the
    mode as safe_mode: no set-id or o+w bit is ever written back)."""
    st = os.stat(path)
    return {"mode": safe_mode(st.st_mode), "uid": st.st_uid, "gid": st.st_gid}


def _check_backup(ctx, deploy_id, paths, serve_path=None):
    """Raise OpFailed(backup_corrupt) unless backups/<deploy_id> has a manifest covering
    `paths` (and the serve file) whose copies match it."""
    root = os.path.join(ctx.backups_dir, deploy_id)
    try:
        with open_private(os.path.join(root, "manifest.json")) as fh:
            manifest = json.load(fh)
    except (OSError, ValueError) as exc:
        message = "backup %s unreadable: %s" % (deploy_id, exc)
        raise OpFailed(Code.BACKUP_CORRUPT, message) from None
    missing = sorted(set(paths) - set(manifest["files"]))
    if serve_path and (manifest.get("serve") or {}).get("path") != serve_path:
        missing.append(serve_path)
    if missing:
        message = "backup %s lacks %s" % (deploy_id, ", ".join(missing))
        raise OpFailed(Code.BACKUP_CORRUPT, message)
    _verify_backup(root, manifest)


def _verify_backup(root, manifest):
    """Raise OpFailed(backup_corrupt) when a copy under `root` differs from the manifest."""
    for rel, info in manifest["files"].items():
        if info["existed"] and private_sha256(os.path.join(root, "files", rel)) != info["sha256"]:
            message = "backup copy of %s does not match its manifest" % rel
            raise OpFailed(Code.BACKUP_CORRUPT, message)
    serve = manifest.get("serve")
    copy = os.path.join(root, "serve")
    if serve and serve["existed"] and private_sha256(copy) != serve["sha256"]:
        raise OpFailed(Code.BACKUP_CORRUPT, "backup copy of %s does not match" % serve["path"])


def op_install(ctx, args):
    """Compute every new file, check it against the lock, then replace the files
    atomically; return an InstallResult (the paths written).

    A replaced file keeps its mode, uid and gid; a new one takes its directory's owner
    (and mode 0644). Nothing is written unless every file computes to its result sha256
    and can keep its owner. Raises OpFailed: backup_corrupt, unsafe_path (also: an owner
    this agent cannot give), drift, patch_failed, result_mismatch, verify_failed.
    """
    site, planned, serve = args.site_packages, [], args.serve
    if args.deploy_id:  # the backup must still be good before the first write
        paths = [spec.path for spec in args.files]
        _check_backup(ctx, args.deploy_id, paths, serve and serve.path)
    for spec in args.files:
        full = safe_join(site, spec.path)
        current = sha256_file(full)
        if current == spec.result_sha256:
            continue
        if current != spec.base_sha256 and current not in spec.upgrade_sha256:
            raise OpFailed(Code.DRIFT, "%s: base changed since preflight" % spec.path)
        planned.append((full, spec.path, _new_bytes(full, spec)))
    paths = [full for full, _rel, _data in planned]
    check_owners(paths + ([check_serve_path(serve.path)] if serve else []))
    for full, _rel, data in planned:  # write_atomic keeps no set-id or o+w bit (safe_mode)
        mode = os.stat(full).st_mode & 0o7777 if os.path.exists(full) else 0o644
        write_atomic(full, data, mode, owner_of(full))
        clear_pycache(full)
    if serve and sha256_file(check_serve_path(serve.path)) != serve.sha256:
        data = base64.b64decode(serve.content_b64)
        if sha256_bytes(data) != serve.sha256:
            message = "%s: content differs from its sha256" % serve.path
            raise OpFailed(Code.RESULT_MISMATCH, message)
        # A new serve file may hold an api key: owner-only unless one existed before.
        mode = os.stat(serve.path).st_mode & 0o7777 if os.path.exists(serve.path) else 0o600
        write_atomic(serve.path, data, mode, owner_of(serve.path))
        planned.append((serve.path, serve.path, data))
    wrong = [rel for full, rel, data in planned if sha256_file(full) != sha256_bytes(data)]
    if wrong:
        raise OpFailed(Code.VERIFY_FAILED, "installed files differ from lock", {"files": wrong})
    return InstallResult(installed=[rel for _, rel, _ in planned])


def _new_bytes(full, spec):
    """Return the new bytes of one file (diff applied to the file at `full`, or the
    content); raises OpFailed(patch_failed | result_mismatch)."""
    if spec.diff is not None:
        with open(full, encoding="utf-8", newline="") as fh:
            base_text = fh.read()
        try:
            data = apply_unified_diff(base_text, spec.diff).encode("utf-8")
        except ValueError as exc:
            raise OpFailed(Code.PATCH_FAILED, "%s: %s" % (spec.path, exc)) from None
    else:
        data = base64.b64decode(spec.content_b64)
    if sha256_bytes(data) != spec.result_sha256:
        message = "%s: result sha256 differs from lock" % spec.path
        raise OpFailed(Code.RESULT_MISMATCH, message)
    return data


def op_restore(ctx, args):
    """Put every file of a backup back (or remove it if it did not exist), then verify;
    return Restored (files: {path: "restored"}, the backup's dir, the hand edits found,
    where their bytes were saved or None, the files that could not be checked).

    First, before any write, the files are checked for hand edits (drift.find_drift): a
    drifted file refuses the restore (OpFailed drift, data a DriftRefusal) unless
    args.force, which first copies the drifted bytes beside the backup (drift_saved).
    A file already at its original bytes is left alone, so a restore after a failure that
    changed nothing needs no free space and no write access. The manifest must pass
    restore_check (this python's package root, permission bits only, plausible owners, the
    inventory's serve file) and each backup copy, read only when private.py finds it this
    user's alone, must match it before it is written back. Raises OpFailed: no_backup,
    backup_unreadable, unsafe_path, drift, state_dir_unwritable (the drifted bytes could not
    be saved: nothing restored), restore_failed (data: a RestoreFailure, the state of every file).
    """
    root = os.path.join(ctx.backups_dir, args.deploy_id)
    manifest = read_manifest(ctx, args.deploy_id)
    if manifest is None:
        raise OpFailed(Code.NO_BACKUP, "no backup %s" % args.deploy_id)
    site = check_manifest(args.deploy_id, manifest, args.package, args.serve_path)
    for rel, info in manifest["files"].items():  # every copy private before the first write
        if info.get("existed"):
            private_sha256(os.path.join(root, "files", rel))
    drift, unchecked = find_drift(ctx, args.deploy_id, manifest)
    saved = None
    if drift and not args.force:
        message = describe_drift(args.deploy_id, drift) + "; nothing restored"
        raise OpFailed(Code.DRIFT, message, DriftRefusal(drift))
    if drift:
        saved = save_drifted(ctx, args.deploy_id, manifest, drift)
    states = {}
    for rel, info in manifest["files"].items():
        full = safe_join(site, rel)
        states[rel] = _restore_one(full, os.path.join(root, "files", rel), info)
    if manifest.get("serve"):
        serve = manifest["serve"]
        path = check_serve_path(serve["path"])
        states[serve["path"]] = _restore_one(path, os.path.join(root, "serve"), serve, False)
    bad = {rel: s for rel, s in states.items() if s != "restored"}
    if bad:
        data = RestoreFailure(states, drift, saved)
        raise OpFailed(Code.RESTORE_FAILED, "some files were not restored", data)
    return Restored(states, root, drift, saved, unchecked)


def _restore_one(full, copy, info, is_module=True):
    """Put one file back from its backup `copy` as `info` (its manifest entry) says, with
    its mode, uid and gid (backups made before owners were kept: the owner it has now, or
    its directory's); return its state: restored, backup copy corrupt, differs from backup,
    error: ..."""
    wanted = info.get("sha256") if info["existed"] else None
    owner = (info["uid"], info["gid"]) if "uid" in info else None
    if sha256_file(full) == wanted:
        if wanted is not None and not _meta_matches(full, info, owner):
            return _restore_meta(full, info, owner)
        return "restored"
    try:
        if info["existed"]:
            with open_private(copy) as fh:
                data = fh.read()
            if sha256_bytes(data) != wanted:
                return "backup copy corrupt"
            write_atomic(full, data, info["mode"], owner or owner_of(full))
        else:
            os.unlink(full)
        if is_module:
            try:
                clear_pycache(full)
            except OSError:
                pass  # a stale .pyc is ignored by Python: its source mtime/size no longer match
    except OSError as exc:
        return "error: %s" % exc
    return "restored" if sha256_file(full) == wanted else "differs from backup"


def _meta_matches(full, info, owner):
    """True when the file at `full` has the manifest's mode (and owner, when recorded)."""
    st = os.stat(full)
    same_owner = owner in (None, (st.st_uid, st.st_gid))
    return st.st_mode & 0o7777 == safe_mode(info["mode"]) and same_owner


def _restore_meta(full, info, owner):
    """Give a file whose bytes are back its recorded owner and mode; return its state."""
    try:
        if owner is not None:
            os.chown(full, owner[0], owner[1])  # before chmod: chown clears set-id bits
        os.chmod(full, safe_mode(info["mode"]))
    except OSError as exc:
        return "error: %s" % exc
    return "restored"


def op_prune(ctx, args):
    """Keep the newest args.keep backups, never removing one whose deploy is still
    `installing`; return Pruned (the deploy ids removed and kept)."""
    states = deploy_states(read_journal(ctx))
    # deploy ids sort by time: they start with a UTC stamp
    ids = [b["deploy_id"] for b in list_backups(ctx)]
    installing = {d for d in ids if states.get(d, {}).get("state") == JournalState.INSTALLING}
    removed, kept = split_backups(ids, installing, args.keep)
    for deploy_id in removed:
        shutil.rmtree(os.path.join(ctx.backups_dir, deploy_id))
    return Pruned(removed, kept)
