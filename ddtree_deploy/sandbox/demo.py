"""`make demo`: the real job on local sandbox hosts, narrated.

Starts real sshd hosts (each with the real sglang 0.5.13.post1 and a sglang-shaped stub
server), then runs the actual CLI: hosts check -> push ddtree@1.0.0 -> status -> push of a
deliberately broken ddtree@1.0.1 (its smoke gate fails, the hosts roll back by themselves)
-> rollback of 1.0.0 -> status. Every step is a real `ddtree-deploy` process.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

from ddtree_deploy.sandbox.hosts import start_sandbox

REPO = Path(__file__).resolve().parents[2]
BROKEN_LINE = "\nfrom sglang.srt.speculative.spec_info import NoSuchName  # deliberately broken\n"


def build_demo_patchsets(workdir: Path) -> Path:
    """workdir/patchsets with the shipped ddtree 1.0.0 and a broken 1.0.1 that still locks."""
    from ddtree_deploy.patchset import load_patchset, write_lock

    root = workdir / "patchsets" / "ddtree"
    shutil.rmtree(root, ignore_errors=True)
    shutil.copytree(REPO / "patchsets" / "ddtree" / "1.0.0", root / "1.0.0")
    broken = root / "1.0.1"
    shutil.copytree(root / "1.0.0", broken, ignore=shutil.ignore_patterns("*.lock.json"))
    spec = broken / "patchset.toml"
    spec.write_text(spec.read_text().replace('version = "1.0.0"', 'version = "1.0.1"', 1))
    utils = broken / "files" / "sglang" / "srt" / "speculative" / "ddtree_utils.py"
    utils.write_text(utils.read_text() + BROKEN_LINE)
    write_lock(load_patchset(broken))
    return root.parent


def step(title: str, args: list[str], expect: int) -> bool:
    print(f"\n\033[1m==> {title}\033[0m\n$ ddtree-deploy {' '.join(args)}", file=sys.stderr)
    code = subprocess.run([sys.executable, "-m", "ddtree_deploy", *args], cwd=REPO).returncode
    ok = code == expect
    verdict = "as expected" if ok else f"UNEXPECTED (wanted {expect})"
    print(f"--> exit {code} {verdict}", file=sys.stderr)
    return ok


def run_demo(workdir: Path, hosts: int = 2) -> int:
    workdir = workdir.resolve()
    print(
        f"starting {hosts} sandbox hosts under {workdir} (first run builds the base env, "
        "about a minute)",
        file=sys.stderr,
    )
    sandbox = start_sandbox(workdir, hosts, first_octet=None)
    patchsets = build_demo_patchsets(workdir)
    common = ["-i", str(sandbox.inventory_path)]
    pdir = ["--patchsets-dir", str(patchsets)]
    results = [
        step("facts of every host", ["hosts", "check", "--all", *common, *pdir], 0),
        step(
            "what a push would change", ["plan", "--all", "-p", "ddtree@1.0.0", *common, *pdir], 0
        ),
        step(
            "push DDTree 1.0.0 (backup, install, compile, smoke, restart, health, commit)",
            ["push", "--all", "-p", "ddtree@1.0.0", *common, *pdir],
            0,
        ),
        step("status", ["status", "--all", "-p", "ddtree@1.0.0", *common, *pdir], 0),
        step(
            "push a deliberately broken 1.0.1: its imports smoke fails, hosts roll back",
            ["push", "--all", "-p", "ddtree@1.0.1", *common, *pdir],
            1,
        ),
        step("still at 1.0.0", ["status", "--all", "-p", "ddtree@1.0.0", *common, *pdir], 0),
        step(
            "roll back 1.0.0: byte-identical to the pristine sglang",
            ["rollback", "--all", *common],
            0,
        ),
        step("status after rollback", ["status", "--all", *common], 0),
    ]
    print(
        f"\ndemo: {sum(results)}/{len(results)} steps as expected. Hosts keep running; "
        f"inventory: {sandbox.inventory_path}\nstop them with: make demo-down",
        file=sys.stderr,
    )
    return 0 if all(results) else 1
