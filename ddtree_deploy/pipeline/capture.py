"""Capture a hand-edited package from one inventory host (`patchset new --from-host`).

One read-only request: the agent's `edits` op compares the installed package with its
dist's RECORD and sends back the bytes of only the files that differ. Nothing on the host
changes, so no host lock is taken and no state dir is written. What it found becomes a
`Capture`, the same record `--from-tree` and `--from-diff` make, for write_patchset.
"""

from __future__ import annotations

import base64

from ddtree_deploy.agent import AgentRequest, Op, OpResult, sha256_bytes
from ddtree_deploy.agent.host.wire import Code, EditsArgs, OpName
from ddtree_deploy.agent.host.wire_capture import (
    CHANGED,
    EXTRA,
    MISSING,
    EditsResult,
    VersionRefusal,
)
from ddtree_deploy.errors import AgentError, PatchsetError
from ddtree_deploy.patchset.capture import Capture
from ddtree_deploy.patchset.models import MAX_FILE_BYTES, Target
from ddtree_deploy.transport import Transport

# The most bytes one capture brings back (before base64): a patchset is a few files.
CAPTURE_MAX_TOTAL_BYTES = 32 * 1024 * 1024


def edits_op(target: Target, max_total_bytes: int = CAPTURE_MAX_TOTAL_BYTES) -> Op:
    """Return the edits op for `target` (the host refuses another installed version), with
    the patchset's per-file size limit and `max_total_bytes` for the whole answer."""
    return Op.of(
        EditsArgs(
            package=target.package,
            target_version=target.version,
            max_file_bytes=MAX_FILE_BYTES,
            max_total_bytes=max_total_bytes,
        )
    )


def capture_host(transport: Transport, target: Target) -> Capture:
    """Return the Capture of `target`'s package as hand-edited on the transport's host: one
    round trip, the edits op alone.

    Raises PatchsetError (bad input, nothing written): another version installed, an
    editable install, the package not importable, a file that could not be sent (binary,
    too large, a symlink). Raises AgentError when the agent answered no edits result or the
    op broke (an exception on the host, arguments it could not read: not bad input);
    TransportError propagates.
    """
    host = transport.host
    request = AgentRequest(state_dir=host.state_dir, ops=[edits_op(target)])
    response = transport.call(request)
    result = response.result(OpName.EDITS)
    if result is None:
        raise AgentError(host.name, response.error or "no answer to the edits op")
    if not result.ok and result.code in (Code.EXCEPTION, Code.BAD_ARGS):
        raise AgentError(host.name, f"the edits op failed: {result.error}")
    if not result.ok:
        raise PatchsetError(refusal_message(host.name, target, result))
    return capture_from_edits(host.name, target, result.data_as(EditsResult))


def refusal_message(host_name: str, target: Target, result: OpResult) -> str:
    """Return the one line saying why host `host_name` refused the edits op (pure)."""
    if result.code == Code.VERSION_MISMATCH:
        refused = result.data_or_none(VersionRefusal)
        installed = refused.installed if refused is not None else None
        return (
            f"{host_name}: installed {target.package} is {installed}, --target is "
            f"{target.package}=={target.version}: capture from a host running "
            f"{target.version} (or give --target {target.package}=={installed})"
        )
    return f"{host_name}: {result.error or result.code}"


def capture_from_edits(host_name: str, target: Target, found: EditsResult) -> Capture:
    """Return the Capture the host's answer describes (pure): changed files (they exist in
    the wheel) and extra ones (added), deleted = RECORD's files gone from the host.

    Raises PatchsetError naming the host and every file whose bytes did not come back (and
    why) or do not match the sha256 the host sent, and for an answer about another version
    than `target`.
    """
    if found.package_version != target.version:
        raise PatchsetError(
            f"{host_name}: installed {target.package} is {found.package_version}, "
            f"--target is {target.package}=={target.version}"
        )
    unsent = [f"{f.path} ({f.error})" for f in found.files if f.error is not None]
    if unsent:
        raise PatchsetError(f"{host_name}: cannot capture " + "; ".join(unsent))
    changed: dict[str, bytes] = {}
    added: dict[str, bytes] = {}
    deleted: list[str] = []
    for f in found.files:
        if f.status == MISSING:
            deleted.append(f.path)
            continue
        data = base64.b64decode(f.content_b64 or "")
        if sha256_bytes(data) != f.sha256:
            raise PatchsetError(f"{host_name}: {f.path}: the bytes sent back do not hash as sent")
        if f.status == CHANGED:
            changed[f.path] = data
        elif f.status == EXTRA:
            added[f.path] = data
        else:
            raise PatchsetError(f"{host_name}: {f.path}: unknown status {f.status!r}")
    source = f"host {host_name} ({found.package_root})"
    return Capture(changed, added, deleted, list(found.ignored), source=source)
