"""`make demo`: the real job on local sandbox hosts, narrated.

Starts two real sshd hosts, each with the real sglang 0.5.13.post1 and a REAL sglang server
(`python -m sglang.launch_server`, the tiny fp32 target built locally, CPU) serving DFLASH.
Then the actual CLI: hosts check -> plan ddtree@1.1.0
(code + the DDTREE flags) -> push with the serving gate (the old DFLASH servers' baseline is
measured first; the servers restart with DDTREE, the lossless gate compares their greedy
output with the target's own, token for token, and the serving gate compares tokens/s,
accept length and greedy text with the baseline) -> status -> push of a broken
ddtree@1.1.1 whose tree mask is dropped: it imports, compiles and starts fine, and only the
lossless gate catches it, so the hosts roll back by themselves -> push of a slow
ddtree@1.1.6 (same text, a sleep in verify): only the serving gate's baseline comparison
catches it -> rollback of 1.1.0 (DFLASH again, the old flags byte for byte) -> status.
Then (as root, Docker installed: `make deps`) one more host whose sglang server is a REAL
systemd unit (`sglang.service`, systemd 252 as PID 1 in a container on a private dockerd,
the serve file as its EnvironmentFile=): push 1.1.0 there (systemctl restart, the unit's
journal and NRestarts watched) -> status -> rollback.
Every step is a real `ddtree-deploy` process.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

from ddtree_deploy.patchset import copy_version, default_patchsets_dir, load_patchset
from ddtree_sandbox.broken import VARIANTS, build_broken_patchset
from ddtree_sandbox.gate_fixtures import GATE_VARIANTS, build_gate_patchset
from ddtree_sandbox.hosts import can_namespace, start_sandbox

SYSTEMD_DIR = "systemd"  # the systemd host's own sandbox, under the demo's workdir


def build_demo_patchsets(workdir: Path) -> Path:
    """workdir/patchsets with the shipped ddtree 1.1.0 (from the checkout holding the current
    directory, or $DDTREE_DEPLOY_PATCHSETS), a broken 1.1.1 and a slow 1.1.6 that still lock."""
    root = workdir / "patchsets" / "ddtree"
    shutil.rmtree(root, ignore_errors=True)
    copy_version(load_patchset(default_patchsets_dir() / "ddtree" / "1.1.0"), root / "1.1.0")
    build_broken_patchset(root / "1.1.0", root.parent, "mask")
    build_gate_patchset(root / "1.1.0", root.parent, "slow")
    return root.parent


def step(title: str, args: list[str], expect: int) -> bool:
    print(f"\n\033[1m==> {title}\033[0m\n$ ddtree-deploy {' '.join(args)}", file=sys.stderr)
    code = subprocess.run([sys.executable, "-m", "ddtree_deploy", *args]).returncode
    ok = code == expect
    verdict = "as expected" if ok else f"UNEXPECTED (wanted {expect})"
    print(f"--> exit {code} {verdict}", file=sys.stderr)
    return ok


def run_demo(workdir: Path, hosts: int = 2) -> int:
    workdir = workdir.resolve()
    print(
        f"starting {hosts} sandbox hosts under {workdir}, each with a real sglang server "
        "(first run builds the base env and the tiny models: about two minutes)",
        file=sys.stderr,
    )
    # Both hosts serve the target. (The control target, whose output is token 0 whatever the
    # tree, proves acceptance but cannot tell a lossy build from a good one.)
    sandbox = start_sandbox(workdir, hosts, first_octet=None)
    patchsets = build_demo_patchsets(workdir)
    common = ["-i", str(sandbox.inventory_path)]
    pdir = ["--patchsets-dir", str(patchsets)]
    broken, slow = VARIANTS["mask"], GATE_VARIANTS["slow"]
    results = [
        step("facts of every host", ["hosts", "check", "--all", *common, *pdir], 0),
        step(
            "what a push would change: code files and the server flags (DFLASH -> DDTREE)",
            ["plan", "--all", "-p", "ddtree@1.1.0", *common, *pdir],
            0,
        ),
        step(
            "push DDTree 1.1.0: baseline of the DFLASH servers, install, smoke, restart with "
            "DDTREE, lossless + accept length, then the serving gate against the baseline",
            ["push", "--all", "-p", "ddtree@1.1.0", "--gate", "quick", *common, *pdir],
            0,
        ),
        step(
            "status: serving DDTREE", ["status", "--all", "-p", "ddtree@1.1.0", *common, *pdir], 0
        ),
        step(
            f"push a broken {broken.version} ({broken.what}): it imports and serves, the "
            "lossless gate catches it, hosts roll back",
            ["push", "--all", "-p", f"ddtree@{broken.version}", *common, *pdir],
            1,
        ),
        step("still at 1.1.0", ["status", "--all", "-p", "ddtree@1.1.0", *common, *pdir], 0),
        step(
            f"push a slow {slow.version} ({slow.what}): lossless, so only the serving gate's "
            "tokens/s against the 1.1.0 baseline catches it; hosts roll back",
            ["push", "--all", "-p", f"ddtree@{slow.version}", "--gate", "quick", *common, *pdir],
            1,
        ),
        step(
            "roll back 1.1.0: pristine sglang and the old DFLASH flags, byte for byte",
            ["rollback", "--all", *common],
            0,
        ),
        step("status after rollback: serving DFLASH", ["status", "--all", *common], 0),
    ]
    results += systemd_steps(workdir, patchsets)
    print(
        f"\ndemo: {sum(results)}/{len(results)} steps as expected. Hosts keep running; "
        f"inventory: {sandbox.inventory_path}\nstop them with: make demo-down",
        file=sys.stderr,
    )
    return 0 if all(results) else 1


def systemd_steps(workdir: Path, patchsets: Path) -> list[bool]:
    """The systemd part: one host whose server is a real systemd unit; [] (said why) when
    this machine cannot run it (not root: no private dockerd)."""
    if not can_namespace():
        print("\n(skipping the systemd host: it needs root and Docker: make deps)", file=sys.stderr)
        return []
    print("\nstarting one more host: sshd and sglang.service under real systemd", file=sys.stderr)
    sandbox = start_sandbox(workdir / SYSTEMD_DIR, 1, names=["sysd0"], first_octet=None,
                            service_kind="systemd")  # fmt: skip
    inventory = sandbox.inventory_path  # a real server's start under systemd: 30-80 s loaded
    text = inventory.read_text().replace("ready_timeout_s = 60\n", "ready_timeout_s = 300\n")
    inventory.write_text(text)
    common = ["-i", str(inventory)]
    pdir = ["--patchsets-dir", str(patchsets)]
    return [
        step(
            "push 1.1.0 to the systemd host: systemctl restarts sglang.service with DDTREE "
            "(the unit reads the serve file), its journal and NRestarts watched, every gate",
            ["push", "-H", "sysd0", "-p", "ddtree@1.1.0", *common, *pdir],
            0,
        ),
        step("status of the systemd host", ["status", "-H", "sysd0", *common, *pdir], 0),
        step("roll it back: DFLASH again", ["rollback", "-H", "sysd0", *common], 0),
    ]
