"""What the serving tests check inside a host after ddtree 1.1.0 is pushed (no server needed).

WORKER_MODULES: patched or new modules the push's `imports` suite must import in a fresh
process. GLUE_PROBE: run by the host's python against the pushed sglang: the glue's own
objects, no GPU.
"""

WORKER_MODULES = {
    "sglang.srt.speculative.dflash_worker",
    "sglang.srt.speculative.ddtree_info",
    "sglang.srt.speculative.ddtree_worker_utils",
    "sglang.srt.speculative.ddtree_utils",
    "sglang.srt.server_args",
    "sglang.srt.speculative.spec_info",
}

# Run by the host's python against the pushed sglang: the glue's own objects, no GPU.
GLUE_PROBE = """
import types, torch
from sglang.srt.speculative import ddtree_info as di, ddtree_utils as du
from sglang.srt.speculative import ddtree_worker_utils as wu
from sglang.srt.speculative.dflash_info import DFlashVerifyInput
from sglang.srt.speculative.spec_info import SpecInputType
tree = du.build_ddtree_tree_from_logits(torch.randn(3, 7), 4)
packed = wu.pack_ddtree_verify_batch([du.compile_ddtree_tree(tree, 5, 9)], 6)
vi = di.DDTreeVerifyInput(
    draft_token=packed.input_ids, positions=packed.positions, draft_token_num=6, tree=packed
)
assert isinstance(vi, DFlashVerifyInput) and vi.is_verify_input()
assert vi.spec_input_type == SpecInputType.DDTREE_VERIFY
assert vi.get_spec_adjust_token_coefficient() == (6, 6)
TritonAttnBackend = type("TritonAttnBackend", (), {})
ns = types.SimpleNamespace
shard = ns(num_added_elements=0, org_vocab_start_index=0, num_org_elements=7)
head = ns(shard_indices=shard, weight=torch.zeros(7, 2))
runner = ns(attn_backend=TritonAttnBackend(), model=ns(lm_head=head))
args = ns(tp_size=1, disable_cuda_graph=False, speculative_ddtree_budget=5)
worker = ns(server_args=args, target_worker=ns(model_runner=runner), page_size=1, tp_rank=0,
            block_size=4)
di.check_ddtree_worker(worker)
worker.page_size = 16
try:
    di.check_ddtree_worker(worker)
    raise SystemExit("page size 16 was accepted")
except ValueError as exc:
    assert "--page-size" in str(exc), exc
print("glue ok")
"""
