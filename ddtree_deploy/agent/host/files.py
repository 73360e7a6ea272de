"""Durable file primitives of the host: atomic writes, journal appends, stale bytecode
removal, and the path checks that keep every write inside its root."""

import datetime
import json
import os
import tempfile

from .wire import Code, OpFailed

# The most of a mode any file the agent writes gets: no setuid, setgid or sticky bit and
# never writable by others, whatever a manifest, an old file or a caller asks for.
SAFE_MODE_BITS = 0o775


def safe_mode(mode):
    """`mode` less every bit outside SAFE_MODE_BITS."""
    return mode & SAFE_MODE_BITS


def now_utc():
    """Return the current UTC time as ISO 8601 text, to the second."""
    return datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")


def fsync_dir(path):
    """fsync the directory `path`, so a rename inside it survives a crash. Raises OSError."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_atomic(path, data, mode=0o644, owner=None):
    """Write `data` (bytes) to `path` with permission bits `mode` (safe_mode: never a
    set-id, sticky or world-writable bit) and, when given, `owner`
    ((uid, gid); see owner_of): temp file in the same directory, fsync, os.replace, fsync
    the directory. A reader sees the old or the new bytes, never a mix. Directories it
    creates take `owner` too. Raises OSError (no temp file is left behind)."""
    directory = os.path.dirname(path)
    make_dirs(directory, owner)
    fd, tmp = tempfile.mkstemp(prefix=".ddtree-", dir=directory)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
            if owner is not None:  # before chmod: chown clears the set-id bits
                _chown_if_differs(fh.fileno(), owner)
        os.chmod(tmp, safe_mode(mode))
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    fsync_dir(directory)


def owner_of(path):
    """Return (uid, gid) a file written at `path` keeps: the file's own when it exists, else
    its nearest existing directory's (a new file takes its directory's owner, not the
    agent's: with become the agent runs as root). Raises OSError."""
    probe = path
    while not os.path.exists(probe):
        parent = os.path.dirname(probe)
        if parent == probe:
            break
        probe = parent
    st = os.stat(probe)
    return st.st_uid, st.st_gid


def can_own(owner):
    """True when this process may give a file `owner` (uid, gid): root may give any; anyone
    else only its own uid with one of its groups."""
    uid, gid = owner
    if os.geteuid() == 0:
        return True
    return uid == os.geteuid() and (gid == os.getegid() or gid in os.getgroups())


def owner_problem(path):
    """Return why a file written at `path` could not keep its owner (owner_of), or None."""
    owner = owner_of(path)
    if can_own(owner):
        return None
    return "%s: cannot keep its owner uid %d gid %d, the agent runs as uid %d (become?)" % (
        path,
        owner[0],
        owner[1],
        os.geteuid(),
    )


def check_owners(paths):
    """Raise OpFailed(unsafe_path) naming every path whose file could not keep its owner
    (owner_of) when this agent writes it: a non-root agent over another user's file."""
    problems = [p for p in map(owner_problem, paths) if p]
    if problems:
        raise OpFailed(Code.UNSAFE_PATH, "; ".join(problems))


def keep_owner(path, owner):
    """Give `path` (not following a symlink) `owner` when it differs and this process
    may; return True when it has that owner afterwards. Best effort: raises nothing."""
    try:
        st = os.lstat(path)
        if (st.st_uid, st.st_gid) == tuple(owner):
            return True
        if not can_own(owner):
            return False
        os.lchown(path, owner[0], owner[1])
        return True
    except OSError:
        return False


def make_dirs(directory, owner=None):
    """Create `directory` and its missing parents (mode 0777 less the umask), each given
    `owner` when not None. Raises OSError."""
    missing = []
    probe = directory
    while probe and not os.path.isdir(probe):
        missing.append(probe)
        parent = os.path.dirname(probe)
        if parent == probe:
            break
        probe = parent
    for path in reversed(missing):
        try:
            os.mkdir(path)
        except FileExistsError:
            if not os.path.isdir(path):
                raise
            continue
        if owner is not None:
            _chown_if_differs(path, owner)


def _chown_if_differs(target, owner):
    """chown `target` (a path or an open fd) to `owner` unless it has it. Raises OSError."""
    st = os.stat(target)
    if (st.st_uid, st.st_gid) != tuple(owner):
        os.chown(target, owner[0], owner[1])


def append_line(path, record):
    """Append `record` (a JSON-able dict) as one line to `path` (created 0600) and fsync.
    Raises OSError."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    try:
        os.write(fd, (json.dumps(record, sort_keys=True) + "\n").encode())
        os.fsync(fd)
    finally:
        os.close(fd)


def clear_pycache(path):
    """Remove the cached bytecode of the module at `path`, so Python cannot run a stale
    .pyc; return the names of the files removed. Raises OSError."""
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


def safe_join(root, rel):
    """Return root/rel; raises OpFailed(unsafe_path) for an absolute path, `..`, NUL, or
    a path whose symlinks lead outside `root`."""
    if rel.startswith("/") or ".." in rel.split("/") or "\x00" in rel:
        raise OpFailed(Code.UNSAFE_PATH, "refusing path %r" % (rel,))
    full = os.path.join(root, rel)
    real_root = os.path.realpath(root)
    if os.path.commonpath([os.path.realpath(full), real_root]) != real_root:
        raise OpFailed(Code.UNSAFE_PATH, "%r resolves outside %s (symlink?)" % (rel, root))
    return full


def check_serve_path(path):
    """Return `path` (the serve file) if it is absolute without `..` or NUL; raises
    OpFailed(unsafe_path) otherwise."""
    if not path.startswith("/") or ".." in path.split("/") or "\x00" in path:
        raise OpFailed(Code.UNSAFE_PATH, "refusing serve file path %r" % path)
    return path
