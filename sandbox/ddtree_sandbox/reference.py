"""Make the lossless references a patchset ships for the sandbox's tiny models.

``python -m ddtree_sandbox reference --patchset patchsets/ddtree/1.1.0`` starts one
sandbox host per model kind with a REAL sglang server WITHOUT speculative decoding, runs the
`server` suite in record mode against it (the same code a push runs before a restart), and
writes ``reference/sandbox-tiny-<kind>-fp32.json`` into the patchset: the target's own greedy
output for the patchset's [lossless] prompts, keyed by the model's fingerprint. The models are
built byte-for-byte deterministically, so the fingerprint matches on every machine; the host
test `test_shipped_references_equal_a_plain_server` proves the files still hold.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path

import ddtree_deploy.smoke
from ddtree_deploy.patchset import load_patchset
from ddtree_sandbox.hosts import SERVICE_PORT, start_sandbox

SMOKE_DIR = Path(ddtree_deploy.smoke.__file__).parent  # the installed product's suite scripts
REFERENCE_KINDS = ("target", "control")
# The control target's drafts are always right: with block 4 every verify step of DFLASH, or
# of DDTREE with a budget >= 3, accepts 3 drafts + the bonus (4.0 measured). Its reference
# carries this floor, so the gate proves multi-token acceptance on a host serving it.
MODEL_FLOORS = {"control": 3.0}


def reference_name(kind: str) -> str:
    return f"reference/sandbox-tiny-{kind}-fp32.json"


def record_with_suite(server_url: str, lossless: dict, record_dir: Path) -> dict:
    """Run the product's smoke/server.py in record mode here against ``server_url``; return
    the suite's result line. The suite is stdlib-only and reads the model from the server's
    model_path."""
    payload = {
        "suite": "server",
        "options": {
            "server": {"server_url": server_url, "timeout_s": 120},
            "service": "command",
            "lossless": {**lossless, "mode": "record", "record_dir": str(record_dir)},
        },
    }
    done = subprocess.run(
        [sys.executable, str(SMOKE_DIR / "server.py")],
        input=json.dumps(payload),
        capture_output=True,
        text=True,
        timeout=600,
    )
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    if not lines:
        raise RuntimeError(f"server suite printed no result: {done.stderr[-2000:]}")
    return json.loads(lines[-1])


def render_reference(reference: dict) -> str:
    """The reference as JSON text with one line per prompt (reviewable in a diff)."""
    head = json.dumps({k: v for k, v in reference.items() if k != "outputs"}, indent=1)
    rows = ",\n".join(f"  {json.dumps(row)}" for row in reference["outputs"])
    return f'{head[:-2]},\n "outputs": [\n{rows}\n ]\n}}\n'


def make_references(patchset_dir: Path, workdir: Path) -> list[Path]:
    """Record and write one reference per model kind into ``patchset_dir``; return the paths."""
    spec = load_patchset(patchset_dir).spec
    if spec.lossless is None:
        raise ValueError(f"{patchset_dir}: patchset.toml has no [lossless] section")
    lossless = {
        "required": True,
        "prompts": [p.model_dump(exclude_none=True) for p in spec.lossless.prompts],
        "max_new_tokens": spec.lossless.max_new_tokens,
        "concurrency": 1,
    }
    written = []
    for kind in REFERENCE_KINDS:
        sandbox = start_sandbox(
            workdir / kind, 1, first_octet=None, models=[kind], initial_algorithm=None
        )
        try:
            host = sandbox.hosts[0]
            record_dir = Path(tempfile.mkdtemp(prefix="ddtree-reference-"))
            result = record_with_suite(
                f"http://{host.address}:{SERVICE_PORT}", lossless, record_dir
            )
            files = list(record_dir.glob("*.json"))
            if not result.get("passed") or len(files) != 1:
                raise RuntimeError(f"{kind}: nothing recorded: {result.get('details')}")
            reference = json.loads(files[0].read_text())
        finally:
            sandbox.stop()
        reference["model"] = f"sandbox tiny {kind} (sandbox/ddtree_sandbox/make_models.py)"
        if kind in MODEL_FLOORS:
            reference["min_accept_length"] = MODEL_FLOORS[kind]
        reference["source"] = (
            "python -m ddtree_sandbox reference: a real sglang "
            f"{reference.get('sglang_version')} server without speculative decoding, CPU"
        )
        out = patchset_dir / reference_name(kind)
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(render_reference(reference))
        written.append(out)
    return written
