"""The host's state dir as the ops see it: paths, journal, lock record, backups list, and
the installed distribution the patchset targets."""

import json
import os

UNFINISHED = ("installing", "rollback_failed")  # journal states a `recover` must finish


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
    """Return deploy_id -> its latest journal entry, ordered by each deploy's last entry."""
    latest = {}
    for entry in entries:
        if "deploy_id" in entry:
            latest.pop(entry["deploy_id"], None)
            latest[entry["deploy_id"]] = entry
    return latest


def read_lock(ctx):
    """Return the lock record, None when there is no lock, or a stand-in that counts as
    expired when the file cannot be parsed."""
    try:
        with open(ctx.lock_path, encoding="utf-8") as fh:
            return json.load(fh)
    except FileNotFoundError:
        return None
    except ValueError:
        return {"holder": "unreadable lock file", "expires_epoch": 0}


def find_distribution(name):
    """Return the installed distribution `name` (importlib.metadata, on this python's
    sys.path), or None when it is not installed."""
    import importlib.metadata as md

    try:
        return md.distribution(name)
    except md.PackageNotFoundError:
        return None


def list_backups(ctx):
    """Return one {deploy_id, created, patchset, broken} per backup dir, sorted by name
    (deploy ids start with a UTC stamp, so this is oldest first)."""
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
