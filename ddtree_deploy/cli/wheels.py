"""Saying which pristine wheel a local command downloads before it does (stderr), and where
it is kept: `$DDTREE_DEPLOY_CACHE`/wheels (patchset/materialize.py)."""

from __future__ import annotations

from rich.text import Text

from ddtree_deploy.patchset.materialize import CACHE_ENV, cached_wheel, fetch_wheel, wheels_dir
from ddtree_deploy.patchset.models import Target

from .context import RunContext

CACHE_HELP = (
    f"The pristine wheel of a patchset's target is downloaded once (pip download --no-deps) "
    f"into ${CACHE_ENV}/wheels (default ~/.cache/ddtree-deploy/wheels) and read from there."
)


def fetch_wheels(run: RunContext, *targets: Target) -> None:
    """Fetch each target's wheel that the cache does not hold yet, saying on stderr what is
    downloaded and into which folder first (unless -q); cached ones are not mentioned.
    Raises PatchsetError when a download fails (materialize.fetch_wheel)."""
    seen: set[tuple[str, str]] = set()
    for target in targets:
        key = (target.package, target.version)
        if key in seen or cached_wheel(target) is not None:
            continue
        seen.add(key)
        if not run.output.quiet:
            line = Text.assemble(
                ("downloading", "cyan"),
                f" {target.package}=={target.version} (the pristine wheel, pip download "
                f"--no-deps) into {wheels_dir()} [${CACHE_ENV} moves it]",
            )
            run.console.print(line, soft_wrap=True, highlight=False)
        fetch_wheel(target)
