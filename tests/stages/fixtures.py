"""Small PreparedPatchset values for the pure stage tests (no files, no lock)."""

from __future__ import annotations

from ddtree_deploy.patchset.models import ServeConfig
from ddtree_deploy.stages.prepared import PreparedPatchset


def prepared_with_serve(args: list[str] | None = None) -> PreparedPatchset:
    """A patchset that declares server flags ([serve]) and no files."""
    serve = ServeConfig(args=args or ["--speculative-algorithm", "DDTREE"])
    return PreparedPatchset(
        "ddtree@9.9.9", "ddtree", "9.9.9", "sglang", "0.5.13.post1", (), (), (), 60.0, serve
    )
