"""The agent protocol's records for capturing a hand-edited package: the `edits` op's
arguments, its answer and its refusals' data (the arguments re-exported by wire.py, where
OP_ARGS maps op names to them).
Stdlib only.

`edits` compares the installed package's files with its distribution's RECORD and sends
back only what differs, so `patchset new --from-host` fetches a few files, not the package.
"""

from typing import List, Optional

from .record import Record, field

CHANGED, EXTRA, MISSING = "changed", "extra", "missing"


class EditsArgs(Record):
    """edits: the distribution to inspect, the version it must be (None: any), and how many
    bytes may come back: per file (max_file_bytes) and for all files together
    (max_total_bytes, counted before base64)."""

    package: str = "sglang"
    target_version: Optional[str] = None
    max_file_bytes: int = 2 * 1024 * 1024
    max_total_bytes: int = 16 * 1024 * 1024


class EditedFile(Record):
    """One file of the package that is not as its RECORD says (path relative to the package
    root, i.e. site-packages).

    status: "changed" (its sha256 differs from RECORD's), "extra" (on disk under the package,
    not in RECORD) or "missing" (in RECORD, not on disk). sha256: now (None when missing);
    record_sha256: RECORD's (None when extra); size_bytes: on disk (0 when missing).
    content_b64: the bytes, sent for changed and extra files that are UTF-8 text within the
    limits; otherwise `error` says why they were not sent (binary, too large, a symlink).
    """

    OMIT_IF_NONE = ("content_b64", "error")
    path: str
    status: str
    sha256: Optional[str]
    record_sha256: Optional[str]
    size_bytes: int
    content_b64: Optional[str] = None
    error: Optional[str] = None


class EditsResult(Record):
    """What `edits` found: the installed version, the package root (site-packages), how many
    files RECORD lists under the package with a hash (recorded), every file that differs,
    sorted by path, and what was skipped under the package (ignored: `__pycache__/` dirs,
    ending in "/", and build outputs such as .pyc and .so files), sorted."""

    NESTED = (("files", EditedFile, "list"),)
    package_version: str
    package_root: str
    recorded: int
    files: List[EditedFile]
    ignored: List[str] = field(default_factory=list)


class VersionRefusal(Record):
    """The data of the edits op's `version_mismatch`: the version installed on the host."""

    installed: str


class EditableRefusal(Record):
    """The data of the edits op's `editable_install`: the editable source tree (None when
    it cannot be found)."""

    package_root: Optional[str]
