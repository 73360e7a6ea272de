"""What the controller made of local files (ssh_config, known_hosts), kept while they do not
change: every host of a fleet asks the same files, so one parse serves them all."""

from __future__ import annotations

import stat
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Generic, TypeVar

T = TypeVar("T")
# A file's identity: device, inode, mtime, ctime (ns), size; None when it is not a regular
# file. ctime too: a chmod, or a rewrite whose mtime was set back, moves only ctime.
Identity = tuple[int, int, int, int, int] | None


def identity(path: Path) -> Identity:
    """`path`'s identity, None when it is missing or not a regular file."""
    try:
        st = path.stat()
    except OSError:
        return None
    if not stat.S_ISREG(st.st_mode):
        return None
    return (st.st_dev, st.st_ino, st.st_mtime_ns, st.st_ctime_ns, st.st_size)


class FileCache(Generic[T]):
    """Values made from files, each kept while its files' identities are unchanged."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._entries: dict[tuple[Path, ...], tuple[tuple[Identity, ...], T]] = {}

    def get(self, paths: Sequence[Path], make: Callable[[list[Path]], T]) -> T:
        """`make(present)` (`present`: those of `paths` that are regular files), or what it
        returned for the same paths while none of them changed. Under a lock, so threads
        that ask at once make it once; when `make` raises, nothing is kept."""
        key = tuple(paths)
        stamps = tuple(identity(path) for path in key)
        with self._lock:
            kept = self._entries.get(key)
            if kept is not None and kept[0] == stamps:
                return kept[1]
            value = make([path for path, stamp in zip(key, stamps, strict=True) if stamp])
            self._entries[key] = (stamps, value)
            return value
