"""Hand edits since a deploy: the files of a deploy's backup whose bytes are neither what
that deploy (or a later one) wrote nor the original it backed up, and a copy of those bytes
kept beside the backup before a forced restore writes over them.

Why here, on the host: a restore must compare and write under the same state-dir flock in
one round trip, or an edit made between a controller-side check and the write is lost.

A deploy's manifest records each file's `result_sha256` (what the install wrote; the serve
file's too). A file is "drifted" when its sha256 now is none of: that result, the backed-up
original (the restore already happened, or the install never reached it), or the result or
original of any LATER deploy's backup that covers the same file (`rollback --to` an older
deploy is not a hand edit). A backup made before results were recorded cannot be judged:
its files are reported as "unchecked" and restored as before.
"""

import json
import os
import time

from .files import check_serve_path, safe_join, write_atomic
from .private import check_private_dir, open_private
from .pure import sha256_bytes, sha256_file
from .state import UNFINISHED, deploy_states, read_journal
from .wire import Code, JournalState, OpFailed
from .wire_outcomes import DriftRefusal, DriftResult

SERVE_KEY = "serve"  # where the serve file's copy lies in a backup (and in a drift copy)


def read_manifest(ctx, deploy_id):
    """Return the manifest of backups/<deploy_id> (a dict), or None when there is none.

    Raises OpFailed(backup_unreadable) when it exists but cannot be read as JSON, and
    OpFailed(unsafe_path) when it (or its dir) is a link or not this user's alone.
    """
    root = os.path.join(ctx.backups_dir, deploy_id)
    try:
        check_private_dir(root)  # a state-dir file is read only when it is this user's alone
        with open_private(os.path.join(root, "manifest.json"), "r") as fh:
            return json.load(fh)
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:
        raise OpFailed(Code.BACKUP_UNREADABLE, "backup %s: %s" % (deploy_id, exc)) from None


def _entries(manifest):
    """Yield (key, absolute path, manifest entry) for every file a manifest covers: the
    package files (key: their relative path) and the serve file (key: its path)."""
    site = manifest.get("site_packages") or ""
    for rel, info in manifest.get("files", {}).items():
        yield rel, safe_join(site, rel), info
    serve = manifest.get("serve")
    if serve:
        yield serve["path"], check_serve_path(serve["path"]), serve


def _known(info):
    """The sha256s a file of this manifest entry may have without a hand edit."""
    original = info.get("sha256") if info.get("existed") else None
    return {original, info.get("result_sha256")}


def _later_hashes(ctx, deploy_id):
    """{absolute path: sha256s} written or backed up by the deploys after `deploy_id` (deploy
    ids sort by time: they start with a UTC stamp); unreadable manifests are skipped."""
    later = {}  # type: dict
    try:
        names = sorted(os.listdir(ctx.backups_dir))
    except OSError:
        return later
    for name in names:
        if name <= deploy_id:
            continue
        try:
            manifest = read_manifest(ctx, name)
        except OpFailed:
            continue
        for _key, full, info in _entries(manifest or {}):
            later.setdefault(full, set()).update(_known(info))
    return later


def _found_sha256(full):
    """The file's sha256 now (None: absent), or "unreadable: why"."""
    try:
        return sha256_file(full)
    except OSError as exc:
        return "unreadable: %s" % exc


def find_drift(ctx, deploy_id, manifest):
    """Return (drift, unchecked) of the deploy whose backup `manifest` is.

    drift: one {file, expected_sha256, found_sha256, original_sha256} per hand-edited file
    (found_sha256 None: deleted); unchecked: the files whose manifest has no result sha256
    (a backup older than this check). Reads only.
    """
    drift, unchecked, later = [], [], None
    for key, full, info in _entries(manifest):
        if "result_sha256" not in info:
            unchecked.append(key)
            continue
        found = _found_sha256(full)
        if found in _known(info):
            continue
        if later is None:
            later = _later_hashes(ctx, deploy_id)
        if found in later.get(full, ()):
            continue
        original = info.get("sha256") if info.get("existed") else None
        drift.append(
            {
                "file": key,
                "expected_sha256": info.get("result_sha256"),
                "found_sha256": found,
                "original_sha256": original,
            }
        )
    return drift, unchecked


def describe_drift(deploy_id, drift):
    """One line naming every drifted file and its hashes (expected vs found)."""
    shown = [
        "%s: expected sha256 %s, found %s"
        % (d["file"], d["expected_sha256"], d["found_sha256"] or "no file")
        for d in drift
    ]
    return "changed on the host since deploy %s (hand edits?): %s" % (deploy_id, "; ".join(shown))


def save_drifted(ctx, deploy_id, manifest, drift):
    """Copy the drifted files' bytes to backups/<deploy_id>/drifted-<UTC stamp>/ (files/REL
    for package files, `serve` for the serve file, drifted.json listing them), each copy
    verified against the sha256 it was found with; return that directory.

    Owner-only (0700 dirs, 0600 files) like the backup itself. A file that changed between
    the check and the copy is refused (the restore must not write over unsaved bytes).
    Raises OpFailed(state_dir_unwritable) when a copy cannot be written: nothing restored.
    """
    root = os.path.join(ctx.backups_dir, deploy_id)
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    paths = {key: full for key, full, _info in _entries(manifest)}
    umask = os.umask(0o077)
    try:
        dest = _fresh_dir(os.path.join(root, "drifted-" + stamp))
        for entry in drift:
            key, found = entry["file"], entry["found_sha256"]
            if found is None:
                continue  # deleted by hand: no bytes to keep
            with open(paths[key], "rb") as fh:
                data = fh.read()
            if sha256_bytes(data) != found:
                raise OSError("%s changed while it was being saved" % key)
            copy = os.path.join(dest, SERVE_KEY if key.startswith("/") else "files/" + key)
            write_atomic(copy, data, 0o600)
            if sha256_file(copy) != found:
                raise OSError("the copy of %s does not match" % key)
        listing = {"deploy_id": deploy_id, "saved": stamp, "drift": drift}
        write_atomic(os.path.join(dest, "drifted.json"), json.dumps(listing).encode(), 0o600)
    except (OSError, ValueError) as exc:
        message = "could not save the hand-edited files (nothing restored): %s" % exc
        raise OpFailed(Code.STATE_DIR_UNWRITABLE, message, DriftRefusal(drift)) from None
    finally:
        os.umask(umask)
    return dest


def _fresh_dir(base):
    """Create and return `base`, or `base-2`, `base-3`... when it exists (two forced
    restores within a second)."""
    for n in range(1, 100):
        path = base if n == 1 else "%s-%d" % (base, n)
        try:
            os.makedirs(path, mode=0o700)
            return path
        except FileExistsError:
            continue
    raise OSError("no free name beside %s" % base)


def current_deploy(entries):
    """The deploy whose files the host should hold now: the newest unfinished one, else the
    newest committed one; None when neither exists."""
    states = list(deploy_states(entries).values())
    for wanted in (UNFINISHED, (JournalState.COMMITTED,)):
        found = [e for e in states if e.get("state") in wanted]
        if found:
            return found[-1].get("deploy_id")
    return None


def op_drift(ctx, args):
    """Return the DriftResult of args.deploy_id (default: the deploy the host should be
    at, see current_deploy): its hand edits, what `status` shows, and every file a restore
    of that backup puts back (`rollback --dry-run`). Reads only."""
    deploy_id = args.deploy_id or current_deploy(read_journal(ctx))
    answer = DriftResult(deploy_id, drift=[], unchecked=[], error=None, files=[])
    if deploy_id is None:
        return answer
    try:
        manifest = read_manifest(ctx, deploy_id)
    except OpFailed as exc:
        return answer.replace(error=str(exc))
    if manifest is None:
        return answer.replace(error="no backup %s" % deploy_id)
    drift, unchecked = find_drift(ctx, deploy_id, manifest)
    files = sorted(key for key, _full, _info in _entries(manifest))
    return answer.replace(drift=drift, unchecked=unchecked, files=files)
