"""Where the target package really is: the directory a patchset's paths are relative to,
found from the package's import spec, and whether pip installed it as a wheel or editable.

A wheel install keeps its files beside its dist-info in site-packages. An editable install
(`pip install -e DIR`, the official lmsysorg/sglang image's /sgl-workspace/sglang/python)
keeps only a .pth or an import finder there; its files live in the source tree, so the dist's
`locate_file("")` points at the wrong place. Stdlib only.
"""

import collections
import importlib.util
import json
import os
import sys

# root: the directory holding the package dir (what "sglang/srt/x.py" is relative to);
# kind: "wheel" | "editable"; error: why the package cannot be patched where it is found.
# All None when the distribution is not installed.
Located = collections.namedtuple("Located", "root kind error")
NOT_INSTALLED = Located(None, None, None)


def import_name(package):
    """Return the top-level import name of distribution `package` ("sglang-x" -> "sglang_x")."""
    return package.replace("-", "_").replace(".", "_")


def editable_dir(dist):
    """Return the source dir of an editable install (PEP 610 direct_url.json with
    dir_info.editable), else None."""
    try:
        raw = dist.read_text("direct_url.json")
        info = json.loads(raw) if raw else {}
    except (OSError, ValueError):
        return None
    if not isinstance(info, dict) or not (info.get("dir_info") or {}).get("editable"):
        return None
    url = str(info.get("url") or "")
    return url[len("file://") :] if url.startswith("file://") else None


def find_package_dirs(name):
    """Return the directories `import name` would load the package from ([] when it finds
    none, or a module rather than a package).

    The agent's own working directory ('' on sys.path, from `python -c`) is left out: it is
    where SSH happened to start, not where the server imports from.
    """
    saved = list(sys.path)
    cwd = os.getcwd()
    sys.path[:] = [p for p in saved if p not in ("", ".", cwd)]
    try:
        spec = importlib.util.find_spec(name)
    except (ImportError, ValueError):
        spec = None
    finally:
        sys.path[:] = saved
    if spec is None or not spec.submodule_search_locations:
        return []
    return [str(p) for p in spec.submodule_search_locations]


def _inside(path, top):
    """True when `path` is `top` or lies under it (both resolved)."""
    path, top = os.path.realpath(path), os.path.realpath(top)
    return os.path.commonpath([path, top]) == top


def locate_package(package, dist):
    """Return Located(root, kind, error) for distribution `package` (dist: its
    importlib.metadata distribution, or None when it is not installed).

    error names what stands in the way when the dist is installed but its files cannot be
    patched where Python imports them: no importable package, a namespace package spread over
    several dirs, a package dir named other than the import name, or a copy that shadows the
    installed one (a PYTHONPATH entry or .pth ahead of it).
    """
    if dist is None:
        return NOT_INSTALLED
    name = import_name(package)
    source = editable_dir(dist)
    kind = "editable" if source else "wheel"
    dirs = find_package_dirs(name)
    where = "%s %s (%s)" % (package, dist.version, kind)
    if not dirs:
        return Located(
            None, kind, "%s is installed but `import %s` finds no package" % (where, name)
        )
    if len(dirs) != 1:
        message = "%s: `import %s` finds a namespace package over %s" % (where, name, dirs)
        return Located(None, kind, message)
    package_dir = dirs[0]
    if os.path.basename(os.path.normpath(package_dir)) != name:
        message = "%s: `import %s` maps to %s, not a directory named %s" % (
            where,
            name,
            package_dir,
            name,
        )
        return Located(None, kind, message)
    root = os.path.dirname(os.path.normpath(package_dir))
    expected = source if source else str(dist.locate_file(""))
    if not _inside(root, expected):
        message = "%s is installed in %s but `import %s` finds %s (another copy shadows it)" % (
            where,
            expected,
            name,
            package_dir,
        )
        return Located(None, kind, message)
    return Located(root, kind, None)
