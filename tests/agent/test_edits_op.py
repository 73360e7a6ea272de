"""The edits op (what `patchset new --from-host` asks a host), run by the REAL bundle on a
temp host: a fake site-packages whose dist-info RECORD vouches for some files, edited by
hand. Changed, extra and missing files come back, with the bytes of only those; byte-code is
skipped; binary, oversized and symlinked files come back as errors; nothing is written."""

from __future__ import annotations

import base64
import hashlib
import os
from pathlib import Path

from ddtree_deploy.agent.host.wire import Code
from ddtree_deploy.agent.host.wire_capture import EditsResult
from tests.agent.conftest import MODULE, PACKAGE, VERSION, FakeHost, sha
from tests.agent.test_locate import editable  # noqa: F401 - the editable-install fixture

KEPT = "fakepkg/kept.py"  # recorded and untouched: never reported
GONE = "fakepkg/gone.py"  # recorded, deleted by hand
EDITED = "print('edited by hand')\n"
ADDED = "fakepkg/sub/added.py"


def record_line(rel: str, data: bytes) -> str:
    """One RECORD line as pip writes it: sha256 in urlsafe base64 without padding."""
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).decode().rstrip("=")
    return f"{rel},sha256={digest},{len(data)}\n"


def add_recorded(site: Path, rel: str, data: bytes, keep: bool = True) -> None:
    """List `rel` in fakepkg's RECORD; write it to disk too when `keep`."""
    if keep:
        (site / rel).parent.mkdir(parents=True, exist_ok=True)
        (site / rel).write_bytes(data)
    record = next(site.glob("*.dist-info")) / "RECORD"
    record.write_text(record.read_text() + record_line(rel, data))


def edits(host: FakeHost, **args: object) -> tuple[EditsResult | None, object]:
    """Run the edits op alone; return (typed result or None, the op's raw result)."""
    answer = host.call(("edits", {"package": PACKAGE, **args}))
    return answer.result_as("edits", EditsResult), answer.results[0]


def tree_digest(top: Path) -> dict[str, str]:
    """{path: sha256} of every file under `top`: proves the op changed nothing."""
    return {
        str(p.relative_to(top)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(top.rglob("*"))
        if p.is_file()
    }


def hand_edit(site: Path) -> None:
    """Edit fakepkg as a user would on a host: change, add, delete, leave byte-code."""
    add_recorded(site, KEPT, b"KEPT = 1\n")
    add_recorded(site, GONE, b"GONE = 1\n", keep=False)
    add_recorded(site, "fakepkg/__pycache__/mod.cpython-311.pyc", b"\x00old")
    (site / MODULE).write_text(EDITED)
    (site / ADDED).parent.mkdir()
    (site / ADDED).write_text("ADDED = 'é'\n")
    (site / "fakepkg" / "__pycache__" / "mod.cpython-311.pyc").write_bytes(b"\x00new")
    (site / "fakepkg" / "sub" / "__pycache__").mkdir()
    (site / "fakepkg" / "sub" / "__pycache__" / "added.cpython-311.pyc").write_bytes(b"\xff")
    (site / "fakepkg" / "stray.pyc").write_bytes(b"\xff\xfe")
    (site / "outside.py").write_text("not in the package\n")


def test_changed_extra_and_missing_files_come_back_with_only_their_bytes(fake_host):
    hand_edit(fake_host.site)
    before = tree_digest(fake_host.site)
    found, raw = edits(fake_host, target_version=VERSION)
    assert found is not None, raw
    assert (found.package_version, found.package_root) == (VERSION, str(fake_host.site))
    assert found.recorded == 3  # mod.py, kept.py, gone.py (no pyc, no hashless __init__)
    by_path = {f.path: f for f in found.files}
    assert list(by_path) == sorted([MODULE, GONE, ADDED])  # kept.py, byte-code: not reported
    changed, added, gone = by_path[MODULE], by_path[ADDED], by_path[GONE]
    assert (changed.status, changed.sha256) == ("changed", sha(EDITED))
    assert base64.b64decode(changed.content_b64 or "") == EDITED.encode()
    assert changed.record_sha256 == sha("def answer():\n    return 41\n")
    assert (added.status, added.record_sha256, added.error) == ("extra", None, None)
    assert base64.b64decode(added.content_b64 or "").decode() == "ADDED = 'é'\n"
    assert (gone.status, gone.sha256, gone.content_b64) == ("missing", None, None)
    assert found.ignored == [
        "fakepkg/__pycache__/",
        "fakepkg/stray.pyc",
        "fakepkg/sub/__pycache__/",
    ]
    assert tree_digest(fake_host.site) == before  # read-only
    assert not fake_host.state.exists()  # no state dir, no flock, no journal


def test_a_pristine_install_reports_nothing(fake_host):
    found, raw = edits(fake_host)
    assert found is not None and found.files == [] and found.recorded == 1, raw


def test_binary_oversized_and_symlinked_files_come_back_as_errors_without_bytes(fake_host):
    site = fake_host.site
    (site / "fakepkg" / "blob.bin").write_bytes(b"\x89PNG\r\n\x1a\n\xff")
    (site / "fakepkg" / "nul.py").write_bytes(b"x = '\0'\n")  # UTF-8, but a NUL byte
    (site / "fakepkg" / "big.py").write_text("x = 1\n" * 100)
    (site / "fakepkg" / "link.py").symlink_to(site / MODULE)
    os.symlink(site / "fakepkg", site / "fakepkg" / "loop")  # a linked dir: listed, not entered
    (site / "fakepkg" / "small.py").write_text("y = 2\n")
    found, raw = edits(fake_host, max_file_bytes=200)
    assert found is not None, raw
    errors = {f.path: f.error for f in found.files}
    assert "a binary file (NUL bytes or not UTF-8)" in str(errors["fakepkg/blob.bin"])
    assert "a binary file" in str(errors["fakepkg/nul.py"])
    assert "600 bytes exceeds the 200 byte limit per file" in str(errors["fakepkg/big.py"])
    assert "symlink" in str(errors["fakepkg/link.py"]) and "symlink" in str(errors["fakepkg/loop"])
    assert errors["fakepkg/small.py"] is None  # the control: a small text file comes back
    assert all(f.content_b64 is None for f in found.files if f.error)
    found, _ = edits(fake_host, max_file_bytes=1000, max_total_bytes=604)
    assert found is not None
    sent = {f.path: f.content_b64 is not None for f in found.files}
    assert sent["fakepkg/big.py"] and not sent["fakepkg/small.py"]  # 600 + 6 > 604
    late = next(f for f in found.files if f.path == "fakepkg/small.py")
    assert "exceed the 604 byte limit for all files together" in str(late.error)


def test_a_wrong_version_or_missing_package_is_refused_before_reading(fake_host):
    found, raw = edits(fake_host, target_version="2.0")
    assert found is None and raw.code == Code.VERSION_MISMATCH
    assert raw.error == f"installed {PACKAGE} is {VERSION}, the capture targets 2.0"
    assert raw.data == {"installed": VERSION}
    answer = fake_host.call(("edits", {"package": "nosuchpkg"}))
    assert answer.results[0].code == Code.PACKAGE_NOT_FOUND
    assert answer.results[0].error == "nosuchpkg is not installed"


def test_an_editable_install_is_refused_with_where_to_capture_from(editable):  # noqa: F811
    host, _site, source = editable
    found, raw = edits(host, target_version=VERSION)
    assert found is None and raw.code == Code.EDITABLE_INSTALL
    assert raw.error == f"editable install: capture with --from-tree {source}"


def test_the_oldest_host_python_captures_too(oldest_host):
    (oldest_host.site / MODULE).write_text(EDITED)
    found, raw = edits(oldest_host)
    assert found is not None, raw
    assert [(f.path, f.status) for f in found.files] == [(MODULE, "changed")]
