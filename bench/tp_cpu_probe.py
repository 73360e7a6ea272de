"""Does a real sglang 0.5.23 server run with ``--tp-size N`` on this CPU machine? (a probe)

Starts ``python -m sglang.launch_server`` in a sandbox host venv (base env + pristine sglang +
the CPU adaptation fixture, ``ddtree_sandbox.hosts.make_host_venv``) with the sandbox's plain
CPU flags (``ddtree_sandbox.serving``) plus ``--tp-size N`` and any extra flags, waits for
``/health_generate`` (bounded), decodes the lossless prompts of ddtree 2.1.2's patchset greedily
(64 tokens, fp32, EOS ignored), counts the outputs equal to the patchset's recorded reference
(a tp-1 server's; vocabulary 32) or to an earlier probe's (``--expect``), prints one JSON line
(outputs, start seconds, accept length, or the failure and the log's last lines) and stops the
server's whole process group. Run it twice (tp 1, tp 2) and compare.

    PYTHONPATH=.:sandbox python bench/tp_cpu_probe.py --tp 2 --address 127.41.5.1
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
import tomllib
import urllib.request
from pathlib import Path

from ddtree_sandbox import ensure_base_env
from ddtree_sandbox.hosts import make_host_venv
from ddtree_sandbox.models import ensure_models
from ddtree_sandbox.serving import SERVE_ENV, base_launch_args

REPO = Path(__file__).resolve().parents[1]
# The plain target's greedy outputs for those prompts (a tp-1 server, fp32), as the gate uses them.
REFERENCE = REPO / "patchsets/ddtree/2.1.2/reference/sandbox-tiny-target-fp32.json"
PROMPTS = tomllib.loads((REPO / "patchsets/ddtree/2.1.2/patchset.toml").read_text())["lossless"]


def post(url: str, body: dict, timeout: float) -> dict:
    """POST `body` as JSON to `url`; return the JSON answer."""
    request = urllib.request.Request(
        url, json.dumps(body).encode(), {"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(request, timeout=timeout) as answer:
        return json.loads(answer.read())


def wait_healthy(base: str, proc: subprocess.Popen, deadline: float) -> bool:
    """Poll /health_generate until 200, the server exits, or the deadline passes."""
    while time.monotonic() < deadline and proc.poll() is None:
        try:
            with urllib.request.urlopen(base + "/health_generate", timeout=10) as answer:
                if answer.status == 200:
                    return True
        except OSError:
            pass
        time.sleep(1.0)
    return False


def main() -> None:
    """Start, probe, stop; print the result."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--tp", type=int, default=2)
    parser.add_argument("--address", default="127.41.5.1")
    parser.add_argument("--port", type=int, default=30541)
    parser.add_argument("--start-timeout", type=float, default=240.0)
    parser.add_argument("--venv", type=Path, default=Path("/tmp/ddtree-tp-probe/venv"))
    parser.add_argument("--vocab", type=int, default=32, help="the sandbox models' vocabulary")
    parser.add_argument("--expect", type=Path, help="an earlier probe's JSON to compare with")
    parser.add_argument("extra", nargs="*", help="more launch_server flags")
    args = parser.parse_args()
    env_info = ensure_base_env("0.5.23")
    models = ensure_models(env_info, {"vocab_size": args.vocab})
    if not args.venv.exists():
        make_host_venv(args.venv, env_info)
    workdir = Path(tempfile.mkdtemp(prefix="ddtree-tp-probe-"))
    env = {**os.environ, **SERVE_ENV, "TMPDIR": str(workdir)}
    env.pop("PYTHONPATH", None)
    command = [
        str(args.venv / "bin/python"), "-m", "sglang.launch_server",
        *base_launch_args(models.path("target"), args.address, args.port),
        "--tp-size", str(args.tp), *args.extra,
    ]  # fmt: skip
    log = workdir / "server.log"
    started = time.monotonic()
    with log.open("wb") as sink:
        proc = subprocess.Popen(command, stdout=sink, stderr=subprocess.STDOUT, env=env,
                                start_new_session=True)  # fmt: skip
    base = f"http://{args.address}:{args.port}"
    result: dict = {"tp": args.tp, "command": command[1:], "log": str(log)}
    try:
        probe(args, base, proc, started, result)
    except OSError as exc:  # a request timed out or was refused: the server hangs or died
        result["error"] = repr(exc)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
    result["log_tail"] = log.read_text(errors="replace").splitlines()[-40:]
    json.dump(result, sys.stdout)
    print()


def probe(
    args: argparse.Namespace, base: str, proc: subprocess.Popen, started: float, result: dict
) -> None:
    """Wait for health, decode the prompts, fill `result` (outputs, identical, accept length)."""
    if not wait_healthy(base, proc, started + args.start_timeout):
        result["started"] = False
        result["exit_code"] = proc.poll()
    else:
        result["started"] = True
        result["start_seconds"] = round(time.monotonic() - started, 1)
        reference = json.loads(REFERENCE.read_text())
        params = reference["sampling_params"]  # greedy, 64 tokens, EOS ignored
        result["outputs"] = [
            post(base + "/generate", {**p, "sampling_params": params}, 120)["output_ids"]
            for p in PROMPTS["prompts"]
        ]
        if args.expect is not None:
            expected = json.loads(args.expect.read_text())["outputs"]
        elif args.vocab == 32:
            expected = [out["output_ids"] for out in reference["outputs"]]
        else:
            expected = None
        if expected is not None:
            result["identical"] = sum(
                got == want for got, want in zip(result["outputs"], expected, strict=True)
            )
        with urllib.request.urlopen(base + "/server_info", timeout=30) as answer:
            states = json.loads(answer.read()).get("internal_states") or [{}]
        result["avg_spec_accept_length"] = states[0].get("avg_spec_accept_length")


if __name__ == "__main__":
    main()
