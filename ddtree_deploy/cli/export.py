"""`export oci|k8s|dir`: a verified patchset as artifacts other engines roll out.

Local only (no host is contacted). Each command writes a new directory `--out` (refused if it
exists: no user file is overwritten), built beside it and renamed into place once complete,
prints one JSON object on stdout (what was written) and a line for people on stderr.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Any

import typer

from ddtree_deploy.errors import ConfigError
from ddtree_deploy.patchset import Patchset, default_patchsets_dir, resolve_patchset
from ddtree_deploy.stages.prepared import PreparedPatchset, prepare_patchset

from .command import local_command
from .context import RunContext
from .options import PatchsetsDirOpt

export_app = typer.Typer(
    help="A patchset as an OCI image, Kubernetes manifests or a Slurm bind-mount dir.",
    no_args_is_help=True,
)
RefOpt = Annotated[str, typer.Option("--patchset", "-p", help="NAME@VERSION (locked).")]
OutOpt = Annotated[Path, typer.Option("--out", help="A new directory to write (must not exist).")]
BaseOpt = Annotated[
    Path,
    typer.Option("--base", help="The base image: an OCI layout dir or a `docker save` tarball."),
]


def load_prepared(ref: str, patchsets_dir: Path | None) -> tuple[Patchset, PreparedPatchset]:
    """Return the patchset and its prepared form; raises PatchsetError (lock, sources)."""
    patchset = resolve_patchset(patchsets_dir or default_patchsets_dir(), ref)
    return patchset, prepare_patchset(patchset)


@contextmanager
def new_out_dir(out: Path) -> Iterator[Path]:
    """Yield a scratch dir beside `out`, renamed to `out` when the block succeeds and
    removed when it raises; raises ConfigError when `out` exists."""
    if out.exists() or out.is_symlink():
        raise ConfigError(f"{out}: already exists; give a new --out directory")
    if not out.parent.is_dir():
        raise ConfigError(f"{out.parent}: no such directory (for --out)")
    scratch = out.with_name(f".{out.name}.partial")
    shutil.rmtree(scratch, ignore_errors=True)
    scratch.mkdir()
    try:
        yield scratch
        scratch.rename(out)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def report(run: RunContext, summary: dict[str, Any], line: str) -> None:
    """Print the summary as JSON on stdout and `line` for people on stderr."""
    typer.echo(json.dumps(summary, sort_keys=True))
    run.console.print(line, markup=False, highlight=False, soft_wrap=True)


def _export_oci(
    run: RunContext,
    patchset: RefOpt,
    base: BaseOpt,
    out: OutOpt,
    tag: Annotated[str | None, typer.Option("--tag", help="NAME:TAG in the tarball.")] = None,
    patchsets_dir: PatchsetsDirOpt = None,
) -> None:
    """The base image plus ONE patch layer: the locked result files at the package's path
    in the image, whiteouts for stale bytecode, labels naming the base and the patchset.
    Writes OUT/oci (an OCI layout: `skopeo copy oci:OUT/oci docker://REGISTRY/IMAGE:TAG`)
    and OUT/image.tar (`docker load -i`)."""
    from ddtree_deploy.export import export_oci

    ps, prepared = load_prepared(patchset, patchsets_dir)
    name = tag or f"sglang-{prepared.name}:{prepared.version}"
    with new_out_dir(out) as scratch:
        done = export_oci(ps, prepared, base, scratch, name)
    written = done.written
    summary = {
        "patchset": prepared.ref,
        "base": str(base),
        "base_digest": done.base_digest,
        "manifest_digest": written.manifest_digest,
        "layer_digest": written.layer.digest,
        "layer_diff_id": written.layer.diff_id,
        "root": "/" + done.located.root,
        "install": done.located.kind,
        "files": len(done.results),
        "whiteouts": list(done.whiteouts),
        "layout": str(out / "oci"),
        "tarball": str(out / "image.tar"),
        "tag": name,
        "lock_sha256": done.lock_sha256,
    }
    report(
        run,
        summary,
        f"{prepared.ref} on {base}: {written.manifest_digest} ({len(done.results)} files at "
        f"/{done.located.root}, {len(done.whiteouts)} whiteouts) -> {out}",
    )


COMMANDS: dict[str, Callable[..., None]] = {"oci": _export_oci}
for _name, _fn in COMMANDS.items():
    export_app.command(_name)(local_command(_fn))
