"""ddtree 1.1.10's start-up rules in a real sglang 0.5.13.post1 ServerArgs (CPU, sandbox models).

ServerArgs resolves DDTREE as a server would at start; then sglang's own scheduler
(ScheduleBatch.new_tokens_required_next_decode) and req_to_token sizing
(get_req_to_token_extra_context_len) say what they reserve per request and step. With
1.1.9 a budget of 1 under the sandbox draft's block of 4 reserves 2 slots while the draft
block writes 4 (the control); 1.1.10 reserves 4. A workspace past the cap is refused with
the start-up error; a fitting one starts. One process per version (about 10 s each).
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from tests.ddtree.test_ddtree_worker_class import make_patched_venv

PROBE = """
import json, sys
from types import SimpleNamespace
from sglang.srt.server_args import ServerArgs, set_global_server_args_for_scheduler
from sglang.srt.managers.schedule_batch import ScheduleBatch
from sglang.srt.mem_cache.common import get_req_to_token_extra_context_len
from sglang.srt.speculative.spec_info import SpeculativeAlgorithm

models, out = sys.argv[1], []
for budget, requests, fraction in json.loads(sys.argv[2]):
    try:
        args = ServerArgs(
            model_path=models + "/target", speculative_draft_model_path=models + "/draft",
            speculative_algorithm="DDTREE", speculative_ddtree_budget=budget,
            max_running_requests=requests, mem_fraction_static=fraction, device="cpu",
            attention_backend="torch_native", disable_cuda_graph=True,
        )
    except ValueError as exc:
        out.append({"error": str(exc)})
        continue
    set_global_server_args_for_scheduler(args)
    batch = SimpleNamespace(
        token_to_kv_pool_allocator=SimpleNamespace(page_size=1), reqs=[None],
        spec_algorithm=SpeculativeAlgorithm.from_string("DDTREE"), is_spec_v2=False,
    )
    out.append({
        "block": args.speculative_dflash_block_size,
        "width": args.speculative_num_draft_tokens,
        "reserved": ScheduleBatch.new_tokens_required_next_decode(batch),
        "row_headroom": get_req_to_token_extra_context_len(args),
    })
print(json.dumps(out))
"""


@pytest.fixture(scope="module")
def models() -> Path:
    """The sandbox's tiny models, built if missing (about 10 s). This test once looked for
    them in the cache and skipped without them: on a fresh CI machine, where the serving
    tests that build them run later, it never ran."""
    from ddtree_sandbox import ensure_base_env
    from ddtree_sandbox.models import ensure_models

    return ensure_models(ensure_base_env()).root


def resolve(
    tmp_path: Path, models: Path, version: str, configs: list[tuple[int, int, float]]
) -> list[dict]:
    """Return per (budget, max running requests, mem fraction) what ServerArgs resolved."""
    python = make_patched_venv(tmp_path / f"venv-{version}", version)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    done = subprocess.run(
        [str(python), "-W", "ignore", "-c", PROBE, str(models), json.dumps(configs)],
        capture_output=True, text=True, env=env, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_119_reserves_less_than_the_draft_block_writes(tmp_path: Path, models: Path):
    (small,) = resolve(tmp_path, models, "1.1.9", [(1, 8, 0.8)])
    assert small == {"block": 4, "width": 2, "reserved": 2, "row_headroom": 6}
    assert small["reserved"] < small["block"]  # the draft allocates 4 slots, 2 reserved


def test_1110_reserves_the_draft_block_and_caps_the_workspace(tmp_path: Path, models: Path):
    small, usual, refused = resolve(
        tmp_path, models, "1.1.10", [(1, 8, 0.8), (8, 8, 0.8), (1024, 100_000, 0.999)]
    )
    assert small == {"block": 4, "width": 4, "reserved": 4, "row_headroom": 8}
    assert usual == {"block": 4, "width": 9, "reserved": 9, "row_headroom": 13}  # as 1.1.9
    error = refused["error"]
    assert error.startswith("DDTREE verify workspace ")
    assert "(budget 1024, verify width 1025" in error
    assert "100000 requests x 32 vocab" in error and "--max-running-requests <= " in error
