"""Where the target package lives inside the base image, from the image's own metadata,
the way the agent finds it on a host (agent/host/locate.py) but without running Python:

- every `*-packages/<dist>-<version>.dist-info/` of the target distribution is found;
- an editable install (PEP 610 `direct_url.json` with `dir_info.editable`, as in the
  official lmsysorg/sglang image) roots the package at the URL's directory, which the
  site-packages' `.pth` or setuptools' `__editable__` finder must name too;
- a wheel install roots it at the dist-info's site-packages, whose RECORD lists the package.
"""

from __future__ import annotations

import ast
import json
import posixpath
import re
from collections.abc import Callable
from dataclasses import dataclass
from email.parser import BytesHeaderParser

from packaging.utils import canonicalize_name

from ddtree_deploy.errors import ConfigError
from ddtree_deploy.export.image_view import ImageView, clean_path

_DIST_INFO = re.compile(
    r"^(?P<site>(?:.*/)?(?:site|dist)-packages)/(?P<name>[^/]+)-(?P<version>[^/-]+)\.dist-info"
    r"/METADATA$"
)


@dataclass(frozen=True)
class Located:
    """The package's root in the image (no leading /; what `sglang/x.py` is relative to),
    the install kind and the site-packages that holds its dist-info."""

    root: str
    kind: str  # "wheel" | "editable"
    site_packages: str
    dist_info: str


def shown(text: str) -> str:
    """Return image-supplied text safe to print: non-printable characters escaped (a path
    or version read from the image is data, never terminal control)."""
    return "".join(c if c.isprintable() else c.encode("unicode_escape").decode() for c in text)


def keep_for_export(package: str, rels: list[str]) -> Callable[[str], bool]:
    """Return a predicate of the paths an export reads: the package's dist-info metadata,
    site-packages .pth files and editable finders, and files ending in a patchset path."""
    name = package.replace("-", "_").replace(".", "_")
    suffixes = tuple("/" + rel for rel in rels)

    def keep(path: str) -> bool:
        folder, _, base = path.rpartition("/")
        if path.endswith(suffixes):
            return True
        if folder.endswith("-packages"):
            return base.endswith(".pth") or base.startswith("__editable__")
        info = posixpath.basename(folder)
        return info.endswith(".dist-info") and canonicalize_name(
            info.split("-")[0]
        ) == canonicalize_name(name)

    return keep


def locate_in_image(view: ImageView, package: str, version: str) -> Located:
    """Return where `package` (at `version`) is installed in the image; raises ConfigError
    naming the image and what is missing, ambiguous or at another version."""
    source = view.image.source
    wanted = canonicalize_name(package)
    found = []
    for path, entry in view.entries.items():
        match = _DIST_INFO.match(path)
        if match and entry.info.isreg() and canonicalize_name(match["name"]) == wanted:
            found.append(match)
    if not found:
        raise ConfigError(
            f"{source}: the image holds no {package} install (no {package}-*.dist-info)"
        )
    if len(found) > 1:
        places = sorted("/" + posixpath.dirname(m.group(0)) for m in found)
        raise ConfigError(
            f"{source}: the image holds {len(found)} installs of {package}: {shown(str(places))}"
        )
    match = found[0]
    dist_info = posixpath.dirname(match.group(0))
    files = view.read_files(
        [f"{dist_info}/METADATA", f"{dist_info}/direct_url.json", f"{dist_info}/RECORD"]
    )
    installed = _metadata_version(files.get(f"{dist_info}/METADATA")) or match["version"]
    if installed != version:
        raise ConfigError(
            f"{source}: the image holds {package} {shown(installed)}; the patchset targets "
            f"{version}"
        )
    site = match["site"]
    name = package.replace("-", "_").replace(".", "_")
    editable = _editable_dir(files.get(f"{dist_info}/direct_url.json"))
    if editable is not None:
        root = clean_path(editable)
        _check_editable_hook(view, site, root, name)
        kind = "editable"
    else:
        root, kind = site, "wheel"
        record = files.get(f"{dist_info}/RECORD", b"").decode("utf-8", "replace")
        if f"{name}/__init__.py," not in record:
            raise ConfigError(
                f"{source}: /{shown(dist_info)}/RECORD does not list {name}/__init__.py"
            )
    init = view.resolve(posixpath.join(root, name, "__init__.py"))
    if not view.is_file(init):
        raise ConfigError(
            f"{source}: {package} ({kind}) should be at /{shown(root)}/{name} but the image has "
            f"no /{shown(init)}"
        )
    return Located(root=root, kind=kind, site_packages=site, dist_info=dist_info)


def _metadata_version(raw: bytes | None) -> str | None:
    if raw is None:
        return None
    return BytesHeaderParser().parsebytes(raw).get("Version")


def _editable_dir(raw: bytes | None) -> str | None:
    """The source dir of an editable install's direct_url.json, else None."""
    if raw is None:
        return None
    try:
        info = json.loads(raw)
    except ValueError:
        return None
    if not isinstance(info, dict) or not (info.get("dir_info") or {}).get("editable"):
        return None
    url = str(info.get("url") or "")
    return url[len("file://") :] if url.startswith("file://") else None


def _check_editable_hook(view: ImageView, site: str, root: str, name: str) -> None:
    """Raise ConfigError unless a .pth line or an `__editable__` finder's MAPPING in `site`
    points Python at /root (the source dir direct_url.json names)."""
    hooks = [
        posixpath.join(site, n)
        for n in view.children(site)
        if n.endswith(".pth") or (n.startswith("__editable__") and n.endswith("_finder.py"))
    ]
    for path, raw in view.read_files(hooks).items():
        text = raw.decode("utf-8", "replace")
        if path.endswith(".pth"):
            if any(
                clean_path(line.strip()) == root
                for line in text.splitlines()
                if line.strip() and not line.startswith(("#", "import"))
            ):
                return
            continue
        mapping = _finder_mapping(text)
        if clean_path(mapping.get(name, "")) == posixpath.join(root, name):
            return
    raise ConfigError(
        f"{view.image.source}: direct_url.json says {name} is editable from /{shown(root)}, but "
        f"no .pth or __editable__ finder in /{shown(site)} points there"
    )


def _finder_mapping(text: str) -> dict[str, str]:
    """Return the MAPPING literal of a setuptools editable finder ({} if absent)."""
    try:
        tree = ast.parse(text)
    except SyntaxError:
        return {}
    for node in tree.body:
        targets = node.targets if isinstance(node, ast.Assign) else []
        if isinstance(node, ast.AnnAssign):
            targets = [node.target]
        named = any(isinstance(t, ast.Name) and t.id == "MAPPING" for t in targets)
        value_node = getattr(node, "value", None)
        if named and value_node is not None:
            try:
                value = ast.literal_eval(value_node)
            except ValueError:
                return {}
            return {str(k): str(v) for k, v in value.items()} if isinstance(value, dict) else {}
    return {}
