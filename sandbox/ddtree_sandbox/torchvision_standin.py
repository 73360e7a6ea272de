"""Write an import-only torchvision TEST STAND-IN into a sandbox base env.

PyPI's torchvision wheels link CUDA torch, and ``import torchvision`` fails next to the CPU
torch the sandbox uses. sglang imports ``torchvision.io.decode_jpeg`` at module level and
transformers touches a few more names, so the sandbox installs this stand-in: it defines those
names and nothing else. Every function raises NotImplementedError. It is test machinery only and
never reaches a real host.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

# The files' text is part of the base env's cache key (digest_torchvision_standin): the old
# package name in the banner stays, or every machine rebuilds its 2 GB base env.
_BANNER = (
    '"""TEST STAND-IN for torchvision, written by ddtree_deploy.sandbox.\n\n'
    "Import-only: it defines the names sglang and transformers touch at import time so the\n"
    "real sglang imports on a CPU-only test host. Every function raises NotImplementedError.\n"
    'This is not torchvision."""\n\n'
)

_RAISE = (
    "def _not_here(*args, **kwargs):\n"
    '    raise NotImplementedError("torchvision TEST STAND-IN: no image ops in the sandbox")\n\n'
)

# Unknown public names resolve to the raising function, as torchvision has far too many to list.
_GETATTR = (
    "def __getattr__(name):\n"
    '    if name.startswith("__"):\n'
    "        raise AttributeError(name)\n"
    "    return _not_here\n"
)

_FILES: dict[str, str] = {
    "__init__.py": _BANNER
    + "from torchvision import io, transforms\n\n"
    + '__version__ = "0.0.0+ddtree.sandbox.standin"\n'
    + '__all__ = ["io", "transforms"]\n',
    "io.py": _BANNER
    + "import enum\n\n"
    + _RAISE
    + "class ImageReadMode(enum.Enum):\n"
    + "    UNCHANGED = 0\n    GRAY = 1\n    GRAY_ALPHA = 2\n    RGB = 3\n    RGB_ALPHA = 4\n\n\n"
    + "decode_jpeg = _not_here\ndecode_image = _not_here\nread_image = _not_here\n"
    + "read_file = _not_here\nencode_jpeg = _not_here\nread_video = _not_here\n",
    "transforms/__init__.py": _BANNER
    + "from torchvision.transforms import functional, v2\n"
    + "from torchvision.transforms.functional import InterpolationMode\n\n"
    + '__all__ = ["InterpolationMode", "functional", "v2"]\n',
    "transforms/functional.py": _BANNER
    + "import enum\n\n"
    + _RAISE
    + "class InterpolationMode(enum.Enum):\n"
    + '    NEAREST = "nearest"\n    NEAREST_EXACT = "nearest-exact"\n'
    + '    BILINEAR = "bilinear"\n    BICUBIC = "bicubic"\n    BOX = "box"\n'
    + '    HAMMING = "hamming"\n    LANCZOS = "lanczos"\n\n\n'
    + _GETATTR,
    "transforms/v2/__init__.py": _BANNER + "from torchvision.transforms.v2 import functional\n",
    "transforms/v2/functional.py": _BANNER + _RAISE + _GETATTR,
}


def write_torchvision_standin(site_packages: Path) -> Path:
    """Write the stand-in package under ``site_packages``; return its package directory."""
    package_dir = site_packages / "torchvision"
    for rel_path, text in _FILES.items():
        target = package_dir / rel_path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)
    return package_dir


def digest_torchvision_standin() -> str:
    """Return a sha256 hex digest of the stand-in's files, for cache keys."""
    digest = hashlib.sha256()
    for rel_path, text in sorted(_FILES.items()):
        digest.update(f"{rel_path}\0{text}\0".encode())
    return digest.hexdigest()
