"""The agent's compiled bundle, kept between pushes in the user's cache dir: what
`__pycache__` is to an installed package.

Every agent process is sent the bundle as source; compiling it took ≈ 25-30 ms of the
≈ 0.3 CPU s an agent spends on a push (bench/NOTES.md, "session 10"), on every host. The
bootstrap's loader runs a module's code from `loader.C` when it has it; `use_cache` fills
that dict from `<cache>/ddtree-deploy/agent/<key>.code`, or compiles every module once and
writes the file. The key is the bundle's sources with this python's bytecode magic, so
another bundle or another python never reads it.

What is read is trusted no more than a `__pycache__` is: the dir and the file must belong
to this user and be writable by no one else (opened without following links, checked on
the open descriptors), and the file starts with the sha256 of the marshal data after it,
so a torn or damaged file is compiled over, never run. Any failure here only means
compiling from source as before.
"""

import hashlib
import importlib.util
import marshal
import os
import pwd
import sys
import time

SUFFIX = ".code"
KEEP = 4  # cached bundles kept per user: a few controllers of different versions
STALE_TMP_S = 3600.0


def use_cache(loader=None, sources=None):
    """Give `loader` (the bootstrap's, by default) the compiled bundle; return "hit" when
    it came from the cache, "miss" when it was compiled here (and stored if it could be),
    or "off" when there is no bundle (imported from the source tree)."""
    package = sys.modules.get(__package__)
    sources = sources if sources is not None else getattr(package, "SOURCES", None)
    loader = loader if loader is not None else getattr(package, "LOADER", None)
    if not sources or loader is None:
        return "off"
    name = bundle_key(sources) + SUFFIX
    directory = cache_dir()
    try:
        codes = read_codes(directory, name, sources) if directory else None
    except Exception:  # noqa: BLE001 (a cache only saves time: any failure means compiling)
        codes = None
    state = "hit"
    if codes is None:
        codes = compile_bundle(sources)
        if directory:
            write_codes(directory, name, codes)
        state = "miss"
    loader.C = codes
    return state


def bundle_key(sources):
    """sha256 hex of the bundle's {module: source} with this python's bytecode magic."""
    digest = hashlib.sha256(importlib.util.MAGIC_NUMBER)
    digest.update(sys.implementation.cache_tag.encode())
    for name in sorted(sources):
        digest.update(b"\0%s\0%s" % (name.encode(), sources[name].encode("utf-8")))
    return digest.hexdigest()


def cache_dir():
    """$XDG_CACHE_HOME (when absolute) or the user's ~/.cache, + ddtree-deploy/agent; None
    when this user has no home."""
    base = os.environ.get("XDG_CACHE_HOME", "")
    if not os.path.isabs(base):
        try:
            home = pwd.getpwuid(os.geteuid()).pw_dir
        except KeyError:
            return None
        if not home or not os.path.isabs(home):
            return None
        base = os.path.join(home, ".cache")
    return os.path.join(base, "ddtree-deploy", "agent")


def module_file(name):
    """The file name a bundle module's code carries (as the bootstrap's loader names it)."""
    return name.replace(".", "/") + ".py"


def compile_bundle(sources):
    """{module: code object} of every module of the bundle."""
    return {
        name: compile(source, module_file(name), "exec", dont_inherit=True)
        for name, source in sources.items()
    }


def _private(st):
    """True when `st` belongs to this user and no one else may write it."""
    return st.st_uid == os.geteuid() and not st.st_mode & 0o022


def _open_dir(directory):
    """A descriptor of `directory` when it is a real dir that is ours alone, else None."""
    try:
        fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    except OSError:
        return None
    if _private(os.fstat(fd)):
        return fd
    os.close(fd)
    return None


def read_codes(directory, name, sources):
    """The cached {module: code} for exactly `sources`' modules, or None (no file, not
    ours alone, damaged, or another bundle's)."""
    dir_fd = _open_dir(directory)
    if dir_fd is None:
        return None
    try:
        fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW, dir_fd=dir_fd)
    except OSError:
        return None
    finally:
        os.close(dir_fd)
    with os.fdopen(fd, "rb") as fh:
        if not _private(os.fstat(fh.fileno())):
            return None
        data = fh.read()
    digest, payload = data[:32], data[32:]
    if hashlib.sha256(payload).digest() != digest:
        return None
    try:
        codes = marshal.loads(payload)
    except (EOFError, ValueError, TypeError):
        return None
    code_type = type(module_file.__code__)
    if not isinstance(codes, dict) or set(codes) != set(sources):
        return None
    if not all(isinstance(code, code_type) for code in codes.values()):
        return None
    return codes


def write_codes(directory, name, codes):
    """Store `codes` as `name` in `directory` (made 0700 if missing), atomically, and prune
    the oldest bundles beyond KEEP; return True when stored. Never raises for I/O."""
    try:
        os.makedirs(directory, mode=0o700, exist_ok=True)
    except OSError:
        return False
    dir_fd = _open_dir(directory)
    if dir_fd is None:
        return False
    payload = marshal.dumps(codes)
    tmp = "%s.%d.tmp" % (name, os.getpid())
    try:
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW
        fd = os.open(tmp, flags, 0o600, dir_fd=dir_fd)
        with os.fdopen(fd, "wb") as fh:
            fh.write(hashlib.sha256(payload).digest() + payload)
        os.replace(tmp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
        _prune(dir_fd, name)
        return True
    except OSError:
        try:
            os.unlink(tmp, dir_fd=dir_fd)
        except OSError:
            pass
        return False
    finally:
        os.close(dir_fd)


def _prune(dir_fd, current):
    """Remove all but the KEEP newest bundles (never `current`), and the temp files of
    writers that died more than STALE_TMP_S ago."""
    now, bundles, doomed = time.time(), [], []
    for entry in os.listdir(dir_fd):
        try:
            st = os.stat(entry, dir_fd=dir_fd, follow_symlinks=False)
        except OSError:
            continue
        if entry.endswith(".tmp") and now - st.st_mtime > STALE_TMP_S:
            doomed.append(entry)
        elif entry.endswith(SUFFIX) and entry != current:
            bundles.append((st.st_mtime, entry))
    doomed += [entry for _mtime, entry in sorted(bundles, reverse=True)[KEEP - 1 :]]
    for entry in doomed:
        try:
            os.unlink(entry, dir_fd=dir_fd)
        except OSError:
            pass  # another agent pruned it first
