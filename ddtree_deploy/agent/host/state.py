"""The host's state dir as the ops see it: paths, journal, lock record, backups list, and
the installed distribution the patchset targets."""

import json
import os
import re
import sys

from .files import write_atomic
from .private import check_private_dir, open_private
from .wire import JournalState

UNFINISHED = (
    JournalState.INSTALLING,
    JournalState.ROLLBACK_FAILED,
)  # journal states a `recover` must finish
# The journal is read whole at every preflight (~20 ms a MiB, ~1,000 deploys a MiB): past this
# size the next append first rotates it (rotate_journal), so a host's preflight costs the
# same after its thousandth deploy as after its tenth, and its state dir stays bounded.
JOURNAL_ROTATE_BYTES = 1 << 20
JOURNAL_KEEP_ROTATED = 3  # journal.jsonl.1 (newest) .. .3; older history is dropped
JOURNAL_CARRY_DEPLOYS = 50  # as many as Facts.deploys shows


class Ctx:
    """What every op may read: the request, the state-dir paths, whether this agent holds
    the state dir's flock, and the outputs of the ops already run in this request
    (`outputs`: op name -> what the op returned)."""

    def __init__(self, request, flock_held=True):
        self.request = request
        self.flock_held = flock_held
        self.state_dir = request["state_dir"]
        self.lock_path = os.path.join(self.state_dir, "lock")
        self.journal_path = os.path.join(self.state_dir, "journal.jsonl")
        self.backups_dir = os.path.join(self.state_dir, "backups")
        self.outputs = {}

    def ensure_state_dir(self):
        """Create the state dir and backups/ (0700, also when they existed). Raises OSError."""
        os.makedirs(self.backups_dir, mode=0o700, exist_ok=True)
        os.chmod(self.state_dir, 0o700)
        os.chmod(self.backups_dir, 0o700)


def read_journal(ctx):
    """Return every journal entry in order ([] without a journal); an unreadable line
    becomes {"state": "corrupt", "raw": its first 200 characters}."""
    return read_entries(ctx.journal_path)


def read_entries(path):
    """Return every entry of the journal file `path` (the journal or a rotated one), as
    read_journal does ([] without the file)."""
    entries = []
    try:
        with open_private(path, "r") as fh:
            for line in fh:
                if line.strip():
                    try:
                        entries.append(json.loads(line))
                    except ValueError:
                        entries.append({"state": JournalState.CORRUPT.value, "raw": line[:200]})
    except FileNotFoundError:
        pass
    return entries


def rotate_journal(ctx):
    """Start a new journal when the current one has grown past JOURNAL_ROTATE_BYTES; return
    the number of entries carried into it, or None when it was not rotated.

    Like logrotate with `rotate 3`, but what the ops read from the journal survives: the
    latest entry of every unfinished deploy and of the last JOURNAL_CARRY_DEPLOYS deploys is
    copied into the new file (marked "carried": true), so facts, recover, rollback and prune
    see the same deploy states as before. The old file becomes journal.jsonl.1 (a hard
    link made before the new file replaces it: at every instant journal.jsonl is the whole
    old or the whole new journal). Call only while holding the state dir's flock. Raises
    OSError.
    """
    try:
        if os.stat(ctx.journal_path).st_size < JOURNAL_ROTATE_BYTES:
            return None
    except FileNotFoundError:
        return None
    states = list(deploy_states(read_journal(ctx)).values())
    first_recent = len(states) - JOURNAL_CARRY_DEPLOYS
    carried = [
        dict(entry, carried=True)
        for n, entry in enumerate(states)
        if n >= first_recent or entry.get("state") in UNFINISHED
    ]
    rotated = ["%s.%d" % (ctx.journal_path, n) for n in range(1, JOURNAL_KEEP_ROTATED + 1)]
    for n in range(JOURNAL_KEEP_ROTATED - 1, 0, -1):  # .2 -> .3 (the old .3 goes), .1 -> .2
        if os.path.exists(rotated[n - 1]):
            os.replace(rotated[n - 1], rotated[n])
    try:
        os.link(ctx.journal_path, rotated[0])
    except OSError:  # no hard links here (or .1 left, keeping one): a copy, written whole
        with open_private(ctx.journal_path) as fh:
            write_atomic(rotated[0], fh.read(), mode=0o600)
    text = "".join(json.dumps(entry, sort_keys=True) + "\n" for entry in carried)
    write_atomic(ctx.journal_path, text.encode(), mode=0o600)  # fsyncs the dir: link too
    return len(carried)


def deploy_states(entries):
    """Return deploy_id -> its latest journal entry, ordered by each deploy's last entry."""
    latest = {}  # type: dict
    for entry in entries:
        if "deploy_id" in entry:
            latest.pop(entry["deploy_id"], None)
            latest[entry["deploy_id"]] = entry
    return latest


def read_lock(ctx):
    """Return the lock record, None when there is no lock, or a stand-in that counts as
    expired when the file cannot be parsed."""
    try:
        with open_private(ctx.lock_path, "r") as fh:
            return json.load(fh)
    except FileNotFoundError:
        return None
    except ValueError:
        return {"holder": "unreadable lock file", "expires_epoch": 0}


def find_distribution(name):
    """Return the installed distribution `name` on this python's sys.path, or None when it
    is not installed: importlib.metadata's choice (the first sys.path entry holding its
    metadata), read without importing importlib.metadata when that is safe to do.

    Deliberately not importlib.metadata alone: importing it (email, zipfile, csv, pathlib)
    and reading Version through its email parser took ~60 ms of the ~200 ms a preflight
    spends on a host (measured on a sandbox host), and every push's first answer waits on
    it. The fast path covers plain directories on sys.path holding a `NAME-*.dist-info`
    (what pip installs, editable or not), as importlib.metadata matches it (case and
    -_. runs folded); anything else (a zip or egg on sys.path before the match, an
    `.egg-info`, no match at all) is importlib.metadata's to answer. Capture, which needs
    the RECORD as paths, uses `full_distribution`.
    """
    path = _dist_info_dir(name)
    if path is not None:
        return DistInfo(path)
    return full_distribution(name)


def full_distribution(name):
    """importlib.metadata's distribution `name`, or None when it is not installed."""
    import importlib.metadata as md

    try:
        return md.distribution(name)
    except md.PackageNotFoundError:
        return None


def _normal_name(name):
    return re.sub(r"[-_.]+", "_", name).lower()


def _dist_info_dir(name):
    """The `.dist-info` dir importlib.metadata would pick for `name`, or None when the
    first match is of another kind (an `.egg-info`, an `.egg`: importlib.metadata takes a
    dir's metadata dirs before its eggs) or something on sys.path needs importlib.metadata."""
    wanted = _normal_name(name)
    for entry in sys.path:
        where = entry or os.getcwd()
        if not os.path.isdir(where):
            if os.path.exists(where):  # a zip or an egg file: importlib.metadata reads those
                return None
            continue
        try:
            children = os.listdir(where)
        except OSError:
            continue
        egg = False
        for child in children:
            low = child.lower()
            if _normal_name(low.rpartition(".")[0].partition("-")[0]) != wanted:
                continue
            if low.endswith(".dist-info"):
                return os.path.join(where, child)
            if low.endswith(".egg-info"):
                return None
            egg = egg or low.endswith(".egg")
        if egg:
            return None
    return None


class DistInfo:
    """An installed distribution's `.dist-info`, read directly: the parts of
    importlib.metadata's Distribution the agent uses (version, read_text, locate_file)."""

    def __init__(self, path):
        self.path = path

    @property
    def version(self):
        """The Version header of METADATA (headers end at the first blank line), or None."""
        text = self.read_text("METADATA") or ""
        for line in text.splitlines():
            if not line.strip():
                break
            key, _, value = line.partition(":")
            if key.strip().lower() == "version":
                return value.strip()
        return None

    def read_text(self, filename):
        """The named file of the .dist-info, or None when it cannot be read."""
        try:
            with open(os.path.join(self.path, filename), encoding="utf-8") as fh:
                return fh.read()
        except (OSError, UnicodeDecodeError):
            return None

    def locate_file(self, path):
        """`path` relative to the directory holding the .dist-info (site-packages)."""
        parent = os.path.dirname(self.path)
        return os.path.join(parent, path) if path else parent


def list_backups(ctx):
    """Return one {deploy_id, created, patchset, broken} per backup dir, sorted by name
    (deploy ids start with a UTC stamp, so this is oldest first)."""
    found = []
    if os.path.isdir(ctx.backups_dir):
        check_private_dir(ctx.backups_dir)
        for name in sorted(os.listdir(ctx.backups_dir)):
            try:
                with open_private(os.path.join(ctx.backups_dir, name, "manifest.json")) as fh:
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
