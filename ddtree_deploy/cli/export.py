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
from .complete import complete_patchsets
from .context import RunContext
from .export_options import NO_VERIFY, VerifyOptions, with_verify_options
from .export_verify import gate_mounts, gate_oci, verify_request
from .options import PatchsetsDirOpt

export_app = typer.Typer(
    help="A patchset as an OCI image, Kubernetes manifests or a Slurm bind-mount dir.",
    no_args_is_help=True,
)
RefOpt = Annotated[
    str,
    typer.Option(
        "--patchset",
        "-p",
        metavar="NAME@VERSION",
        help="NAME@VERSION (locked).",
        autocompletion=complete_patchsets,
    ),
]
OutOpt = Annotated[
    Path, typer.Option("--out", metavar="DIR", help="A new directory to write (must not exist).")
]
BaseOpt = Annotated[
    Path,
    typer.Option(
        "--base",
        metavar="PATH",
        help="The base image: an OCI layout dir or a `docker save` tarball.",
    ),
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
    tag: Annotated[
        str | None, typer.Option("--tag", metavar="NAME:TAG", help="NAME:TAG in the tarball.")
    ] = None,
    patchsets_dir: PatchsetsDirOpt = None,
    verify: VerifyOptions = NO_VERIFY,
) -> None:
    """The base image plus ONE patch layer: the locked result files at the package's path
    in the image, whiteouts for stale bytecode, labels naming the base and the patchset.
    Writes OUT/oci (an OCI layout: `skopeo copy oci:OUT/oci docker://REGISTRY/IMAGE:TAG`)
    and OUT/image.tar (`docker load -i`). With --verify, only once the image passed the
    patchset's smoke suites inside a container of it (docs/kubernetes.md)."""
    from ddtree_deploy.export import export_oci

    ps, prepared = load_prepared(patchset, patchsets_dir)
    name = tag or f"sglang-{prepared.name}:{prepared.version}"
    gate = verify_request(prepared, verify)
    verified = None
    with new_out_dir(out) as scratch:
        done = export_oci(ps, prepared, base, scratch, name)
        if gate is not None:
            verified = gate_oci(run, prepared, scratch / "image.tar", name, gate, base, out)
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
        "verify": verified,
    }
    passed = ", verified in a container" if verified else ""
    report(
        run,
        summary,
        f"{prepared.ref} on {base}: {written.manifest_digest} ({len(done.results)} files at "
        f"/{done.located.root}, {len(done.whiteouts)} whiteouts{passed}) -> {out}",
    )


def _write_docs(folder: Path, docs: dict[str, Any]) -> None:
    """Write each document as JSON (YAML 1.2) under folder; refuse what fails the checks."""
    from ddtree_deploy.export.k8s_check import check_files

    problems = check_files(docs)
    if problems:  # a bug of ours, not bad input: say so loudly
        raise ConfigError(f"export k8s produced invalid manifests: {problems}")
    folder.mkdir(parents=True, exist_ok=True)
    for name, doc in docs.items():
        (folder / name).write_text(json.dumps(doc, indent=2, sort_keys=True) + "\n")


def _export_k8s(
    run: RunContext,
    patchset: RefOpt,
    out: OutOpt,
    image: Annotated[
        str,
        typer.Option("--image", metavar="REPO", help="Registry repository of the patched image."),
    ],
    digest: Annotated[
        str,
        typer.Option("--digest", metavar="sha256:HEX", help="Its manifest digest (sha256:...)."),
    ],
    workload: Annotated[
        str, typer.Option("--workload", metavar="NAME", help="metadata.name to patch.")
    ],
    args: Annotated[
        str,
        typer.Option(
            "--args",
            metavar="ARGS",
            help="The server container's current args, one shell-quoted string (required: a "
            'patch replaces the whole list; give "" for none).',
        ),
    ],
    kind: Annotated[
        str,
        typer.Option(
            "--kind", metavar="deployment|statefulset|lws", help="deployment | statefulset | lws."
        ),
    ] = "deployment",
    container: Annotated[
        str, typer.Option("--container", metavar="NAME", help="The server container.")
    ] = "sglang",
    container_index: Annotated[
        int, typer.Option("--container-index", metavar="I", min=0, help="lws: its index.")
    ] = 0,
    base_image: Annotated[
        str,
        typer.Option(
            "--base-image", metavar="IMAGE", help="The image name the base manifests use."
        ),
    ] = "lmsysorg/sglang",
    resources: Annotated[
        list[str] | None,
        typer.Option(
            "--resource", metavar="FILE", help="Base manifests (relative to each overlay)."
        ),
    ] = None,
    files_image: Annotated[
        str | None,
        typer.Option(
            "--files-image", metavar="IMAGE", help="Where the files image is pushed (image-volume)."
        ),
    ] = None,
    base: Annotated[
        Path | None,
        typer.Option(
            "--base",
            metavar="PATH",
            help="The base image (OCI layout or docker save tar): needed "
            "by the configmap and image-volume variants, which mount files over it.",
        ),
    ] = None,
    patchsets_dir: PatchsetsDirOpt = None,
    verify: VerifyOptions = NO_VERIFY,
) -> None:
    """Kustomize overlay (image by digest + server args), Helm values, and (with --base) the
    ConfigMap and image-volume variants that mount the result files over the base image.
    With --verify (needs --base), only once a container of the base with the files mounted
    as those variants mount them passed the suites (the image the overlay pins by digest
    is `export oci --verify`'s to gate)."""
    import re
    import shlex
    import tempfile

    from ddtree_deploy.export import k8s
    from ddtree_deploy.export.files import results_from_base
    from ddtree_deploy.export.files_image import write_files_image
    from ddtree_deploy.export.slurm import write_mount_dir

    if kind not in k8s.KINDS:
        raise ConfigError(f"--kind {kind!r}: expected one of {', '.join(k8s.KINDS)}")
    if not re.fullmatch(r"sha256:[0-9a-f]{64}", digest):
        raise ConfigError(f"--digest {digest!r}: expected sha256:<64 hex>")
    _, prepared = load_prepared(patchset, patchsets_dir)
    if verify.verify and base is None:
        raise ConfigError(
            "--verify needs --base: the gate runs the base image with the files mounted over "
            "it (gate the image the overlay pins with `export oci --verify`)"
        )
    gate = verify_request(prepared, verify)
    spec = k8s.Workload(kind, workload, container, container_index, base_image)
    serve = list(prepared.serve.args) if prepared.serve else []
    merged = k8s.merge_args(shlex.split(args), serve)
    bases = resources or ["../base"]
    files = results_from_base(prepared, base) if base is not None else None
    verified = None
    with new_out_dir(out) as scratch:
        if gate is not None and files is not None and base is not None:
            with tempfile.TemporaryDirectory(prefix=f".{out.name}.files-", dir=out.parent) as tmp:
                pairs = write_mount_dir(files, Path(tmp))
                verified = gate_mounts(run, prepared, base, pairs, out, gate)
        _write_docs(
            scratch / "kustomize", k8s.kustomize_overlay(spec, image, digest, merged, bases)
        )
        _write_docs(scratch / "helm", k8s.helm_values(image, digest, serve))
        refused: dict[str, str] = {}
        files_digest = None
        if files is None:
            why = "needs --base: the files are computed from the base image's own files"
            refused = {"configmap": why, "image-volume": why}
        name = f"{prepared.name}-{prepared.version}".replace(".", "-").replace("_", "-")
        try:
            if files is None:
                raise ConfigError(refused["configmap"])
            docs = k8s.configmap_variant(spec, files, (), f"{name}-files")
            patch = next(n for n in docs if n.startswith("patch-"))
            docs["kustomization.yaml"] = k8s.variant_kustomization(
                spec, [*bases, "configmap.yaml"], patch
            )
            _write_docs(scratch / "configmap", docs)
        except ConfigError as exc:
            refused["configmap"] = str(exc)
        if files is not None:
            labels = {"io.ddtree-deploy.patchset": prepared.ref}
            folder = scratch / "image-volume"
            files_digest = write_files_image(files.files, folder / "files-oci", labels)
            reference = files_image or f"{image}-files@{files_digest}"
            docs = k8s.image_volume_variant(spec, files, (), reference)
            patch = next(iter(docs))
            docs["kustomization.yaml"] = k8s.variant_kustomization(spec, bases, patch)
            _write_docs(folder, docs)
    summary = {
        "patchset": prepared.ref,
        "image": f"{image}@{digest}",
        "args": merged,
        "root": files.root if files else None,
        "files_image_digest": files_digest,
        "refused": refused,
        "out": str(out),
        "verify": verified,
    }
    report(
        run,
        summary,
        f"{prepared.ref}: kustomize, helm"
        + "".join(f", {v}" for v in ("configmap", "image-volume") if v not in refused)
        + f" -> {out}"
        + "".join(f"\n{k} refused: {v}" for k, v in refused.items()),
    )


def _export_dir(
    run: RunContext,
    patchset: RefOpt,
    base: BaseOpt,
    out: OutOpt,
    patchsets_dir: PatchsetsDirOpt = None,
    verify: VerifyOptions = NO_VERIFY,
) -> None:
    """A directory of the result files to bind-mount over the image under Slurm (Pyxis
    --container-mounts, Apptainer --bind), with the lines to paste (OUT/mounts.txt). With
    --verify, only once a container of the base with those mounts passed the suites."""
    from ddtree_deploy.export.files import results_from_base
    from ddtree_deploy.export.slurm import mount_lines, write_mount_dir

    _, prepared = load_prepared(patchset, patchsets_dir)
    gate = verify_request(prepared, verify)
    files = results_from_base(prepared, base)
    verified = None
    with new_out_dir(out) as scratch:
        pairs = write_mount_dir(files, scratch)
        if gate is not None:
            verified = gate_mounts(run, prepared, base, pairs, out, gate)
        # the lines name the final dir, not the scratch one it is built in
        final = [
            (src.replace(str(scratch.resolve()), str(out.resolve()), 1), dst) for src, dst in pairs
        ]
        lines = mount_lines(final, ())
        (scratch / "mounts.txt").write_text("".join(f"# {k}\n{v}\n" for k, v in lines.items()))
    summary = {
        "patchset": prepared.ref,
        "root": files.root,
        "mounts": final,
        **lines,
        "verify": verified,
    }
    report(
        run, summary, f"{prepared.ref}: {len(final)} files -> {out}; lines in {out / 'mounts.txt'}"
    )


COMMANDS: dict[str, Callable[..., None]] = {
    "oci": _export_oci,
    "k8s": _export_k8s,
    "dir": _export_dir,
}
for _name, _fn in COMMANDS.items():
    export_app.command(_name)(local_command(with_verify_options(_fn)))
