"""A directory of result files to bind-mount over the image under Slurm, and the lines to
paste: Pyxis/enroot (`srun --container-mounts=SRC:DST:ro,...`) and Apptainer
(`--bind SRC:DST:ro,...`). One file mount per result file, so the image's other files stay;
PYTHONPYCACHEPREFIX points Python away from the image's stale bytecode (files.py says why).
"""

from __future__ import annotations

import posixpath
import shlex
from pathlib import Path

from ddtree_deploy.export.files import PYCACHE_DIR, PYCACHE_ENV, ResultFiles, refuse_deletions


def write_mount_dir(files: ResultFiles, out: Path) -> list[tuple[str, str]]:
    """Write each result under out/files/<patchset path>; return (source, in-image path)."""
    pairs = []
    for rel, data in sorted(files.files.items()):
        target = out / "files" / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
        target.chmod(0o644)
        pairs.append((str(target.resolve()), files.mount_path(rel)))
    return pairs


def mount_lines(pairs: list[tuple[str, str]], deleted: tuple[str, ...]) -> dict[str, str]:
    """Return the text to paste for Pyxis and Apptainer (mount specs + the env line)."""
    refuse_deletions(deleted, "dir")
    specs = ",".join(f"{src}:{dst}:ro" for src, dst in pairs)
    env = f"{PYCACHE_ENV}={PYCACHE_DIR}"
    return {
        "pyxis": f"srun --container-mounts={shlex.quote(specs)} --container-env={PYCACHE_ENV} "
        f"...  # with `export {env}` in the job script",
        "apptainer": f"APPTAINERENV_{PYCACHE_ENV}={PYCACHE_DIR} apptainer exec --bind "
        f"{shlex.quote(specs)} IMAGE.sif ...",
        "env": env,
        "folders": ",".join(sorted({posixpath.dirname(d) for _, d in pairs})),
    }
