"""The agent bundle: the host modules as one {module name: source} dict, its hash (the
agent version) and the line that carries it to an agent process.

Stdlib only (the host's python may be as old as 3.8): the controller packs the bundle for
the host's agent, and a container host's agent packs its own for the agent it starts in the
container (relay.py). Re-exported by wire.py.
"""

import base64
import hashlib
import json
import os
import zlib
from typing import Dict, Union

BUNDLE_PACKAGE = "ddtree_agent"  # the host imports the bundle's modules under this name


def bundle_sources(directory: Union[str, "os.PathLike[str]"]) -> Dict[str, str]:
    """Return {"ddtree_agent.<module>": source text} of every host module in `directory`.

    The bundle is every `*.py` there except `__init__.py` (the host's bootstrap makes the
    package module itself). Raises OSError when the directory cannot be read.
    """
    sources = {}
    for name in sorted(os.listdir(directory)):
        if name.endswith(".py") and name != "__init__.py":
            with open(os.path.join(directory, name), encoding="utf-8") as fh:
                sources[BUNDLE_PACKAGE + "." + name[:-3]] = fh.read()
    return sources


def bundle_hash(sources: Dict[str, str]) -> str:
    """Return the agent version: sha256 hex of the bundle's {module name: source} (sorted)."""
    return hashlib.sha256(json.dumps(sources, sort_keys=True).encode("utf-8")).hexdigest()


# zlib's default: 0.4% larger than level 9 on the bundle (~50 KB), in ~55% of the time.
ZLIB_LEVEL = 6


def pack_bundle(sources: Dict[str, str]) -> bytes:
    """Return the first stdin line of an agent process: the bundle as base64(zlib(JSON)).

    The controller sends it to the host's agent; a container host's agent sends the same
    line (its own bundle) to the agent it starts in the container.
    """
    packed = json.dumps(sources, sort_keys=True).encode("utf-8")
    return base64.b64encode(zlib.compress(packed, ZLIB_LEVEL)) + b"\n"
