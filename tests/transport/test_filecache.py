"""FileCache keeps what it made from files while they are unchanged, by their identity."""

from __future__ import annotations

import os
import time

from ddtree_deploy.transport.filecache import FileCache, identity


def test_a_rewrite_with_its_mtime_set_back_is_made_again(tmp_path):
    path = tmp_path / "known_hosts"
    path.write_text("gpu1 old\n")
    made: list[str] = []
    cache: FileCache[str] = FileCache()

    def make(present):
        made.append(present[0].read_text())
        return made[-1]

    assert cache.get([path], make) == "gpu1 old\n"
    assert cache.get([path], make) == "gpu1 old\n" and len(made) == 1  # kept
    before = path.stat()
    deadline = time.monotonic() + 5.0
    while True:  # the kernel's coarse clock stamps ctime: rewrite until it has ticked
        time.sleep(0.01)
        path.write_text("gpu1 new\n")  # same size, and the mtime put back as it was
        os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
        if path.stat().st_ctime_ns != before.st_ctime_ns or time.monotonic() > deadline:
            break
    assert path.stat().st_ctime_ns != before.st_ctime_ns, "ctime never moved"
    assert path.stat().st_mtime_ns == before.st_mtime_ns
    assert cache.get([path], make) == "gpu1 new\n" and len(made) == 2


def test_missing_and_non_regular_files_have_no_identity(tmp_path):
    assert identity(tmp_path / "missing") is None
    assert identity(tmp_path) is None
    cache: FileCache[list] = FileCache()
    assert cache.get([tmp_path / "missing", tmp_path], lambda present: present) == []
