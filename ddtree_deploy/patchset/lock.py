"""Write and check patchset.lock.json: base and result sha256 of every file."""

from __future__ import annotations

import json

from ddtree_deploy.errors import PatchsetError
from ddtree_deploy.patchset.load import LOCK_NAME, Patchset
from ddtree_deploy.patchset.materialize import (
    compile_results,
    digest,
    fetch_wheel,
    materialize,
)
from ddtree_deploy.patchset.models import LockedFile, PatchsetLock
from ddtree_deploy.patchset.sources import (
    drop_copies,
    local_shared,
    read_source,
    source_file,
    store_copies,
)


def build_lock(patchset: Patchset) -> PatchsetLock:
    """Materialise every file from the pristine wheel and record its hashes."""
    wheel = fetch_wheel(patchset.spec.target)
    files = materialize(patchset, wheel)
    compile_results(patchset, files)
    return PatchsetLock(
        name=patchset.spec.name,
        version=patchset.spec.version,
        target=patchset.spec.target,
        wheel=wheel.name,
        files={
            m.entry.path: LockedFile(
                kind=m.entry.kind,
                source=m.entry.source,
                source_sha256=digest(m.source),
                base_sha256=None if m.base is None else digest(m.base),
                result_sha256=digest(m.result),
            )
            for m in files
        },
        references=digest_references(patchset),
    )


def data_files(patchset: Patchset) -> dict[str, str]:
    """Every data file a gate reads -> what it is: the [lossless] references and the
    [gate] prompts (paths relative to the patchset dir)."""
    spec = patchset.spec
    files = {rel: "lossless reference" for rel in spec.lossless.references} if spec.lossless else {}
    if spec.gate is not None and spec.gate.prompts is not None:
        files[spec.gate.prompts] = "gate prompts"
    return files


def digest_references(patchset: Patchset) -> dict[str, str]:
    """sha256 of every data file of `data_files` (the lock's `references`)."""
    found = {}
    for rel, what in data_files(patchset).items():
        path = patchset.source_path(rel)
        if not path.is_file():
            raise PatchsetError(f"{path}: {what} not found")
        found[rel] = digest(path.read_bytes())
    return found


def write_lock(patchset: Patchset) -> PatchsetLock:
    """Build the lock (see `build_lock`), write patchset.lock.json, and return the lock.

    A ``shared = true`` entry is read from its local copy when the version has one (a file
    being authored, edited in place) and that copy is then moved into the name's store
    (NAME/shared/sha256/<its sha256>); otherwise from the blob the old lock names. Nothing is
    written when the lock cannot be built (PatchsetError).
    """
    lock = build_lock(patchset)
    copies = local_shared(patchset)
    store_copies(patchset.root, copies)  # blobs first: the new lock may name them
    text = json.dumps(lock.model_dump(), indent=2, sort_keys=True) + "\n"
    (patchset.root / LOCK_NAME).write_text(text, encoding="utf-8")
    drop_copies(patchset.root, copies)
    return lock


def check_sources(patchset: Patchset) -> PatchsetLock:
    """The local gate of push: the lock exists, matches the spec, and every source hash.

    Needs no wheel and no network, so it is cheap enough to run before every push.
    """
    lock = patchset.require_lock()
    where = patchset.root / LOCK_NAME
    spec = patchset.spec
    if (lock.name, lock.version, lock.target) != (spec.name, spec.version, spec.target):
        raise PatchsetError(f"{where}: lock is for {lock.name}@{lock.version}, not {spec.ref}")
    if set(lock.files) != {f.path for f in spec.files}:
        raise PatchsetError(f"{where}: lock lists other files than patchset.toml; re-lock")
    references, kinds = digest_references(patchset), data_files(patchset)
    for rel, sha in references.items():
        if lock.references.get(rel) != sha:
            state = "not in the lock" if rel not in lock.references else "changed since the lock"
            raise PatchsetError(
                f"{patchset.source_path(rel)}: {kinds[rel]} {state}; "
                f"run `ddtree-deploy patchset lock {spec.ref}`"
            )
    for entry in spec.files:
        locked = lock.files[entry.path]
        if (locked.kind, locked.source) != (entry.kind, entry.source):
            raise PatchsetError(f"{where}: {entry.path}: lock entry does not match the spec")
        if digest(read_source(patchset, entry)) != locked.source_sha256:
            raise PatchsetError(
                f"{source_file(patchset, entry)}: changed since the lock was written "
                f"(sha256 differs); run `ddtree-deploy patchset lock {spec.ref}`"
            )
        if locked.kind == "new" and locked.result_sha256 != locked.source_sha256:
            raise PatchsetError(  # a whole file is installed as it is: result == source
                f"{where}: {entry.path}: result_sha256 differs from the file's own sha256; "
                f"the lock was edited: run `ddtree-deploy patchset lock {spec.ref}`"
            )
    return lock


def verify_patchset(patchset: Patchset) -> PatchsetLock:
    """Re-materialise from the wheel and compare every hash with the lock; compile results."""
    lock = check_sources(patchset)
    fresh = build_lock(patchset)
    for path, locked in lock.files.items():
        now = fresh.files[path]
        for field in ("base_sha256", "result_sha256"):
            if getattr(now, field) != getattr(locked, field):
                raise PatchsetError(
                    f"{patchset.root / LOCK_NAME}: {path}: {field} mismatch "
                    f"(lock {getattr(locked, field)}, rebuilt {getattr(now, field)})"
                )
    return lock
