"""Durable file primitives of the host: atomic writes, journal appends, stale bytecode
removal, and the path checks that keep every write inside its root."""

import datetime
import json
import os
import tempfile

from .wire import Code, OpFailed


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


def write_atomic(path, data, mode=0o644):
    """Write `data` (bytes) to `path` with permission bits `mode`: temp file in the same
    directory, fsync, os.replace, fsync the directory. A reader sees the old or the new
    bytes, never a mix. Raises OSError (no temp file is left behind)."""
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
    fsync_dir(directory)


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
