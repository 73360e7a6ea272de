"""A backup manifest checked against the host before a restore writes anything.

A manifest says where its files go (`site_packages`, each path), and with what mode and
owner. Someone who could write one (a state dir others can write: private.py refuses that
now) could make a restore put their bytes anywhere, as a setuid file owned by anyone. So
every manifest is held to what the agent finds itself, not to what the manifest says:
- `site_packages` must be the package root this python imports the package from
  (locate.py: the same root facts reports), and every path must stay inside it;
- a mode may hold only permission bits (no setuid, setgid or sticky bit), and an owner
  must be a pair of numbers;
- the serve file must be the one the controller's inventory names.
Any failure is OpFailed(unsafe_path) before the first write.

Owners are not held to the files' present owners: a restore gives back the owner a hand
`chown` took (tests/agent/test_owners.py), so any recorded owner can be right. What keeps
a forged owner out is that no one else can write a manifest (private.py).
"""

import os

from .files import safe_join
from .locate import locate_package
from .state import find_distribution
from .wire import Code, OpFailed

PERMISSION_BITS = 0o777


def _refuse(deploy_id, why):
    raise OpFailed(Code.UNSAFE_PATH, "backup %s refused: %s" % (deploy_id, why))


def check_manifest(deploy_id, manifest, package, serve_path):
    """Return the package root to restore into (None for a manifest of no files) once
    `manifest` passes every check above; raise OpFailed(unsafe_path) naming what does not."""
    if not isinstance(manifest, dict) or not isinstance(manifest.get("files"), dict):
        _refuse(deploy_id, "its manifest has no file table")
    root = None
    if manifest["files"]:  # a backup of the serve file alone writes nothing in the package
        root = _package_root(deploy_id, manifest, package)
        _check_files(deploy_id, manifest["files"], root)
    serve = manifest.get("serve")
    if serve:
        path = serve.get("path") if isinstance(serve, dict) else None
        if not isinstance(path, str) or path != serve_path:
            _refuse(
                deploy_id,
                "its serve file %r is not the inventory's (%r)" % (path, serve_path),
            )
        _check_meta(deploy_id, path, serve)
    return root


def _package_root(deploy_id, manifest, package):
    """The root `package` is imported from here, which the manifest's site_packages must be."""
    root = locate_package(package, find_distribution(package)).root
    if not root:
        _refuse(deploy_id, "package %s is not installed where this python imports it" % package)
    claimed = manifest.get("site_packages")
    if not isinstance(claimed, str) or os.path.realpath(claimed) != os.path.realpath(root):
        _refuse(
            deploy_id,
            "its site_packages %r is not %s, where this python imports %s from"
            % (claimed, root, package),
        )
    return root


def _check_files(deploy_id, files, root):
    """Every path inside `root`, every mode and owner well formed (_check_meta)."""
    for rel, info in files.items():
        try:
            safe_join(root, rel)
        except OpFailed as exc:
            _refuse(deploy_id, str(exc))
        _check_meta(deploy_id, rel, info)


def _check_meta(deploy_id, name, info):
    """Refuse an entry whose mode has bits beyond the permission bits, or whose owner is no
    pair of numbers."""
    if not isinstance(info, dict) or not info.get("existed"):
        return
    mode = info.get("mode")
    if not isinstance(mode, int) or mode & ~PERMISSION_BITS:
        shown = "%04o" % mode if isinstance(mode, int) else repr(mode)
        _refuse(deploy_id, "%s: mode %s (only permission bits are restored)" % (name, shown))
    owner = (info.get("uid"), info.get("gid"))
    if "uid" in info and not all(isinstance(n, int) and n >= 0 for n in owner):
        _refuse(deploy_id, "%s: owner %r is no uid and gid" % (name, owner))
