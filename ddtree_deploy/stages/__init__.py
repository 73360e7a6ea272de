"""Stage building blocks: the prepared patchset and pure agent-op builders."""

from ddtree_deploy.stages.choice import PatchsetChoice, prepare_choice
from ddtree_deploy.stages.prepared import (
    PreparedFile,
    PreparedPatchset,
    default_smoke_dir,
    load_smoke_sources,
    prepare_patchset,
)

__all__ = [
    "PatchsetChoice",
    "PreparedFile",
    "PreparedPatchset",
    "default_smoke_dir",
    "load_smoke_sources",
    "prepare_choice",
    "prepare_patchset",
]
