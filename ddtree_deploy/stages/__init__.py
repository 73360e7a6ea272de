"""Stage building blocks: the prepared patchset and pure agent-op builders."""

from ddtree_deploy.stages.prepared import (
    PreparedFile,
    PreparedPatchset,
    default_smoke_dir,
    load_smoke_sources,
    prepare_patchset,
)

__all__ = [
    "PreparedFile",
    "PreparedPatchset",
    "default_smoke_dir",
    "load_smoke_sources",
    "prepare_patchset",
]
