"""The state dir held to the standard of the agent's code cache (codecache.py): what the
agent reads from it, or runs from it, must be this user's alone.

Another user who can write the state dir (one under /tmp, a shared home, a dir another
account made) could plant a journal and a backup manifest that make `recover` write their
bytes into site-packages as root, or a module the smoke suites import. So, checked on open
descriptors (O_NOFOLLOW, O_DIRECTORY, fstat after open, so a swap after the check changes
nothing that is read):
- the state dir: a real dir (no link anywhere on its path), owned by the effective user,
  writable by no one else;
- every dir above it: owned by root or the effective user and writable by no one else
  unless sticky (/tmp), so no one else can rename the state dir away and put theirs there;
- every file read from it (journal, lock, manifests, backup copies): a regular file owned
  by the effective user and writable by no one else.
A failure is OpFailed(unsafe_path) naming the path and its owner: nothing is written.
The effective user is the agent's: with become, the user sudo made it.
"""

import hashlib
import os
import pwd
import stat

from .wire import Code, OpFailed

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)
# Walking the path needs only search permission on each dir (a 0711 dir above a user's state
# dir is fine): O_PATH descriptors are enough for fstat and openat (Linux; else O_RDONLY).
_WALK_FLAGS = getattr(os, "O_PATH", os.O_RDONLY) | os.O_DIRECTORY | os.O_NOFOLLOW
_FILE_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)


def user_name(uid):
    """`uid N (name)`, or `uid N` for a uid without a passwd entry."""
    try:
        return "uid %d (%s)" % (uid, pwd.getpwuid(uid).pw_name)
    except KeyError:
        return "uid %d" % uid


def _refuse(what, why):
    raise OpFailed(
        Code.UNSAFE_PATH,
        "refusing %s: %s (the agent runs as %s: the state dir and what it reads there must "
        "be that user's alone)" % (what, why, user_name(os.geteuid())),
    )


def _not_private(st):
    """Why a file or dir with stat `st` is not the effective user's alone, or None."""
    if st.st_uid != os.geteuid():
        return "owned by %s" % user_name(st.st_uid)
    if st.st_mode & 0o022:
        return "writable by %s (mode %04o)" % (
            "group and others" if st.st_mode & 0o022 == 0o022
            else ("others" if st.st_mode & 0o002 else "its group"),
            stat.S_IMODE(st.st_mode),
        )  # fmt: skip
    return None


def _unsafe_parent(st):
    """Why a dir above the state dir (stat `st`) lets someone else swap what is below it."""
    if st.st_uid not in (0, os.geteuid()):
        return "owned by %s" % user_name(st.st_uid)
    if st.st_mode & 0o022 and not st.st_mode & stat.S_ISVTX:
        return "writable by others and not sticky (mode %04o)" % stat.S_IMODE(st.st_mode)
    return None


def check_state_dir(path):
    """Return True when the state dir `path` exists, False when it does not (then every
    dir above it that exists is safe to create it in); raise OpFailed(unsafe_path) naming
    the path and its owner when it, or a dir above it, is not safe."""
    if not path.startswith("/") or "\x00" in path or ".." in path.split("/"):
        _refuse("state dir %s" % path, "not an absolute path without `..`")
    what = "state dir %s" % path
    parts = [p for p in path.split("/") if p]
    if not parts:
        _refuse(what, "the root dir is no state dir")
    fd = os.open("/", _WALK_FLAGS)
    try:
        where = "/"
        for n, name in enumerate(parts):
            here = os.path.join(where, name)
            why = _unsafe_parent(os.fstat(fd))
            if why:
                _refuse(what, "%s is %s" % (where, why))
            try:
                st = os.stat(name, dir_fd=fd, follow_symlinks=False)
            except FileNotFoundError:
                return False
            if stat.S_ISLNK(st.st_mode):
                _refuse(what, "%s is a symbolic link (give its real path)" % here)
            if not stat.S_ISDIR(st.st_mode):
                _refuse(what, "%s is not a directory" % here)
            child = os.open(name, _WALK_FLAGS, dir_fd=fd)
            os.close(fd)
            fd, where = child, here
            if n == len(parts) - 1:
                why = _not_private(os.fstat(fd))
                if why:
                    _refuse(what, why)
        return True
    except OSError as exc:
        _refuse(what, "cannot be checked: %s" % exc)
    finally:
        os.close(fd)


def check_private_fd(fd, path):
    """Raise OpFailed(unsafe_path) unless the open `fd` (of `path`) is a regular file or
    dir owned by the effective user and writable by no one else."""
    st = os.fstat(fd)
    if not (stat.S_ISREG(st.st_mode) or stat.S_ISDIR(st.st_mode)):
        _refuse(path, "not a regular file or dir")
    why = _not_private(st)
    if why:
        _refuse(path, why)


def open_private(path, mode="rb", encoding=None):
    """Open the state-dir file `path` for reading (not following a link) and return the
    file object, once its descriptor shows it is this user's alone. Raises
    FileNotFoundError when it is missing, OpFailed(unsafe_path) when it is a link or not
    private, OSError otherwise."""
    fd = _open_checked(path, _FILE_FLAGS)
    if "b" in mode:
        return os.fdopen(fd, mode)
    return os.fdopen(fd, mode, encoding=encoding or "utf-8")


def check_private_dir(path):
    """Raise OpFailed(unsafe_path) unless `path` (a dir inside the state dir: backups/ID,
    its files/) is a real dir that is this user's alone. FileNotFoundError when missing."""
    os.close(_open_checked(path, _DIR_FLAGS))


def _open_checked(path, flags):
    """Open `path` with `flags` (O_NOFOLLOW among them) and return the descriptor once
    check_private_fd passes on it; a link is refused by name, FileNotFoundError kept."""
    try:
        fd = os.open(path, flags)
    except OSError as exc:
        if os.path.islink(path):
            _refuse(path, "a symbolic link")
        raise exc
    try:
        check_private_fd(fd, path)
    except BaseException:
        os.close(fd)
        raise
    return fd


def private_sha256(path):
    """sha256 hex of the state-dir file `path` (read through open_private), None when it
    is missing. Raises OpFailed(unsafe_path) as open_private does."""
    try:
        with open_private(path) as fh:
            return hashlib.sha256(fh.read()).hexdigest()
    except FileNotFoundError:
        return None
