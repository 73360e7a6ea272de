"""ddtree 2.2.0's sharded tree builder (ddtree_tp.py): N gloo ranks build the one-rank tree.

The ranks run in the sandbox base env's python (torch CPU, gloo) from
tests/ddtree/ddtree_tp_ranks.py, on a folder holding the shipped ``ddtree_utils.py`` (2.1.2's
builder, the single-rank reference) and 2.2.0's ``ddtree_tp.py`` under
``sglang/srt/speculative/``. 102 cases: vocabularies 31, 97, 1000, 4099 (odd sizes, padded
shards, a shard with no real token at 4 ranks) and 151936, draft depths 1-15, budgets 4-64,
normal, tie-heavy, peaked, mostly -inf and constant logits. Negative controls in the same run:
ids without the shard's vocab offset, one shard without the gather, padding columns taken.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.support import REPO, utils_file

SCRIPT = Path(__file__).with_name("ddtree_tp_ranks.py")
TP_MODULE = REPO / "patchsets/ddtree/2.2.1/files/sglang/srt/speculative/ddtree_tp.py"
SPECULATIVE = "sglang/srt/speculative"
CLEAN = {"one_rank": 0, "builder": 0, "topk": 0, "ranks_disagree": 0}

LAYOUT_PROBE = r"""
import importlib.util, json, sys, types
import sglang.srt.layers.vocab_parallel_embedding as vpe
for name in ("ddtree_utils", "ddtree_tp"):  # the pristine install has neither: load by path
    spec = importlib.util.spec_from_file_location(
        "sglang.srt.speculative." + name, sys.argv[1] + "/" + name + ".py"
    )
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
VocabShard, vocab_shard = module.VocabShard, module.vocab_shard
out = []
for vocab in (31, 97, 1000, 4099, 151936, 151665):
    for world in (1, 2, 3, 4, 8):
        for rank in range(world):
            vpe.get_parallel = lambda: types.SimpleNamespace(tp_rank=rank, tp_size=world)
            vpe._resolve_linear_group = lambda name: None
            head = vpe.ParallelLMHead(vocab, 4, params_dtype=None)
            real = VocabShard.from_lm_head(head)
            ours, columns = vocab_shard(vocab, rank, world)
            if (real, head.num_embeddings_per_partition) != (ours, columns):
                out.append([vocab, world, rank, str(real), str(ours)])
print(json.dumps(out))
"""


@pytest.fixture(scope="module")
def base_python() -> Path:
    """The sandbox base env's python for sglang 0.5.23 (torch CPU with gloo)."""
    from ddtree_sandbox import ensure_base_env

    return ensure_base_env("0.5.23").python


@pytest.fixture(scope="module")
def package(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder with sglang/srt/speculative/{ddtree_utils.py (2.1.2's), ddtree_tp.py}."""
    root = tmp_path_factory.mktemp("ddtree_tp")
    speculative = root / SPECULATIVE
    speculative.mkdir(parents=True)
    shutil.copyfile(utils_file(REPO / "patchsets/ddtree/2.1.2"), speculative / "ddtree_utils.py")
    shutil.copyfile(TP_MODULE, speculative / "ddtree_tp.py")
    return root


def run_ranks(python: Path, package: Path, ranks: int, controls: bool) -> dict:
    """Run the rank script on `ranks` gloo ranks; return rank 0's summary."""
    store = package / f"store-{ranks}-{controls}"
    store.unlink(missing_ok=True)
    env = {**os.environ, "PYTHONPATH": str(package), "OMP_NUM_THREADS": "1"}
    args = [str(python), str(SCRIPT), "--ranks", str(ranks), "--store", str(store)]
    done = subprocess.run(
        args + (["--controls"] if controls else []),
        capture_output=True, text=True, env=env, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_two_ranks_build_the_one_rank_tree_and_the_controls_do_not(
    base_python: Path, package: Path
) -> None:
    summary = run_ranks(base_python, package, 2, controls=True)
    sharded = summary["modes"]["sharded"]
    assert summary["cases"] == 102
    assert sharded["mismatch"] == CLEAN, sharded
    # The normaliser is a float64 sum over shards, the builder's a float32 one: ulps apart.
    assert sharded["max_prefix_lp_gap_vs_builder"] < 1e-5
    for control in ("no_offset", "one_shard", "padding"):
        caught = summary["modes"][control]["mismatch"]
        assert caught["one_rank"] > 0 and caught["builder"] > 0 and caught["topk"] > 0, control
    assert summary["modes"]["one_shard"]["mismatch"]["ranks_disagree"] > 0


@pytest.mark.parametrize("ranks", [4])  # 3 ranks: same result, run by hand (docs)
def test_more_ranks_build_the_one_rank_tree(base_python: Path, package: Path, ranks: int) -> None:
    sharded = run_ranks(base_python, package, ranks, controls=False)["modes"]["sharded"]
    assert sharded["mismatch"] == CLEAN, sharded
    assert sharded["max_prefix_lp_gap_vs_builder"] < 1e-5


def test_vocab_shard_is_sglangs_parallel_lm_head_layout(base_python: Path, package: Path) -> None:
    """vocab_shard and VocabShard.from_lm_head against a real sglang 0.5.23 ParallelLMHead
    (its TP rank and size and group stubbed: no process group is needed to lay out shards)."""
    from ddtree_sandbox import ensure_base_env

    env_info = ensure_base_env("0.5.23")
    paths = [str(env_info.sglang_dir)]
    if env_info.overlay_dir is not None:
        paths.insert(0, str(env_info.overlay_dir))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(paths), "OMP_NUM_THREADS": "1"}
    done = subprocess.run(
        [str(base_python), "-W", "ignore", "-c", LAYOUT_PROBE, str(package / SPECULATIVE)],
        capture_output=True, text=True, env=env, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    assert json.loads(done.stdout.strip().splitlines()[-1]) == []
