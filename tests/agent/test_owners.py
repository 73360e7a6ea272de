"""Owners and modes through install, compile and restore: the REAL agent bundle on a temp
host (bare `python -c`, LocalTransport), as root so that files can belong to other users.

A replaced file keeps its uid, gid and mode; a new file (and a new directory) takes its
directory's owner, not the agent's; a restore gives the original owner and mode back, also
to a file whose bytes are already back.
"""

from __future__ import annotations

import base64
import os
from pathlib import Path

import pytest

from ddtree_deploy.stages import op_builders as ops
from ddtree_deploy.stages.prepared import PreparedFile
from tests.agent.conftest import (
    MODULE,
    MODULE_TEXT,
    NEW_FILE,
    NEW_TEXT,
    PACKAGE,
    PATCHED_TEXT,
    sha,
)
from tests.agent.test_ops_bundle import FILES, preflight, prepared

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="giving files to other users needs root")

MODULE_OWNER = (1234, 2345)  # no such users needed: chown takes numbers
PACKAGE_DIR_OWNER = (3456, 4567)
NEW_DIR_FILE = "fakepkg/sub/deeper/new.py"
FILES_WITH_NEW_DIR = (
    *FILES,
    PreparedFile(NEW_DIR_FILE, "new", NEW_TEXT.encode(), None, sha(NEW_TEXT)),
)


def meta(path: Path) -> tuple[int, int, str]:
    """(uid, gid, octal mode) of `path`."""
    st = path.stat()
    return st.st_uid, st.st_gid, oct(st.st_mode & 0o7777)


def give_away(site: Path) -> None:
    """mod.py to MODULE_OWNER with mode 0640; the package directory to PACKAGE_DIR_OWNER."""
    os.chown(site / "fakepkg", *PACKAGE_DIR_OWNER)
    os.chown(site / MODULE, *MODULE_OWNER)
    os.chmod(site / MODULE, 0o640)


def test_install_keeps_owners_and_restore_gives_them_back(fake_host):
    site = fake_host.site
    give_away(site)
    p = prepared(FILES_WITH_NEW_DIR)
    assert preflight(fake_host, p).ok
    backup = fake_host.call_ops(ops.backup_op("d1", str(site), p))
    assert backup.ok, backup
    answer = fake_host.call_ops(ops.install_op(str(site), p, "d1"), ops.compile_op(str(site), p))
    assert answer.ok, answer
    assert (site / MODULE).read_text() == PATCHED_TEXT
    assert meta(site / MODULE) == (*MODULE_OWNER, "0o640")
    assert meta(site / NEW_FILE) == (*PACKAGE_DIR_OWNER, "0o644")
    assert meta(site / NEW_DIR_FILE)[:2] == PACKAGE_DIR_OWNER
    for new_dir in ("fakepkg/sub", "fakepkg/sub/deeper"):
        assert meta(site / new_dir)[:2] == PACKAGE_DIR_OWNER, new_dir
    # compiled bytecode belongs to its source's owner, as if that owner had compiled it
    pycs = list((site / "fakepkg" / "__pycache__").glob("mod.*.pyc"))
    assert pycs and all(meta(pyc)[:2] == MODULE_OWNER for pyc in pycs)
    assert meta(site / "fakepkg" / "__pycache__")[:2] == PACKAGE_DIR_OWNER

    # the patched file ends up with another owner and mode (e.g. a careless hand edit):
    # the restore writes the original bytes back with the recorded owner and mode
    os.chown(site / MODULE, 0, 0)
    os.chmod(site / MODULE, 0o600)
    restore = fake_host.call_ops(ops.restore_op("d1", package=PACKAGE))
    assert restore.ok, restore
    assert (site / MODULE).read_text() == MODULE_TEXT
    assert meta(site / MODULE) == (*MODULE_OWNER, "0o640")
    assert not (site / NEW_FILE).exists() and not (site / NEW_DIR_FILE).exists()


def test_restore_fixes_owner_and_mode_of_a_file_whose_bytes_are_back(fake_host):
    site = fake_host.site
    give_away(site)
    p = prepared()
    assert fake_host.call_ops(ops.backup_op("d1", str(site), p)).ok
    os.chown(site / MODULE, 0, 0)  # same bytes, other owner and mode
    os.chmod(site / MODULE, 0o666)
    restore = fake_host.call_ops(ops.restore_op("d1", package=PACKAGE))
    assert restore.ok, restore
    assert meta(site / MODULE) == (*MODULE_OWNER, "0o640")


def test_serve_file_keeps_its_owner_and_a_new_one_takes_its_directory_owner(fake_host, tmp_path):
    site = fake_host.site
    etc = tmp_path / "etc-sglang"
    etc.mkdir()
    os.chown(etc, *PACKAGE_DIR_OWNER)
    serve = etc / "sglang.env"
    install = ops.install_op(str(site), prepared(FILES[:1]))
    text = b'SGLANG_ARGS="--port 30000"\n'
    install.args["serve"] = {"path": str(serve), "content_b64": _b64(text), "sha256": sha(text)}
    assert fake_host.call_ops(install).ok
    assert meta(serve) == (*PACKAGE_DIR_OWNER, "0o600")  # new: the directory's owner, 0600
    os.chown(serve, *MODULE_OWNER)
    os.chmod(serve, 0o640)
    again = b'SGLANG_ARGS="--port 30001"\n'
    install.args["serve"] = {"path": str(serve), "content_b64": _b64(again), "sha256": sha(again)}
    assert fake_host.call_ops(install).ok
    assert serve.read_bytes() == again
    assert meta(serve) == (*MODULE_OWNER, "0o640")  # replaced: keeps owner and mode


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()
