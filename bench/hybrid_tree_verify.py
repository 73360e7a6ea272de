"""sglang 0.5.23's Triton conv-update and GDN recurrent verify kernels, walking TREE parents
(the links DDTREE 2.2.x hands the hybrid backend), against a per-node torch reference: node i's
output must be what a plain sequential run over its root-to-node path gives.

One step of `make gpu-check` (bench/gpu_check.py: real Triton on CUDA) and of its CPU
self-test (TRITON_INTERPRET=1, run by tests/kernels/test_kernels.py with the sandbox base
env's python and the pristine sglang 0.5.23 on sys.path). `check(device)` returns one record:
the largest error of each kernel with the tree's links and with none (the control: a chain
scan over the same slots must NOT match the tree reference). Run alone it prints that record.
"""

from __future__ import annotations

import json
import sys

import torch
import torch.nn.functional as F

# Two requests, W = 6 slots each (slot 0 the root): a branching tree and a chain.
NEXT = [[1, 3, 4, 5, -1, -1], [1, 2, 3, 4, 5, -1]]
SIBLING = [[-1, 2, -1, -1, -1, -1], [-1, -1, -1, -1, -1, -1]]
PARENT = [[-1, 0, 0, 1, 2, 3], [-1, 0, 1, 2, 3, 4]]
W, DIM, KW = 6, 8, 4  # slots, conv channels, conv kernel width
H, HV, DK, DV = 1, 2, 8, 8  # GDN key heads, value heads, head dims
# fp32 everywhere; on CUDA Triton's dots may run in TF32, hence the wider tolerance. The chain
# control must miss by more than either tolerance (here by 1.24 conv, 0.053 GDN).
TOLERANCE = {"cpu": 1e-5, "cuda": 5e-3}
CONTROL_MIN_ERR = 1e-2


def path(request: int, node: int) -> list[int]:
    nodes = []
    while node >= 0:
        nodes.append(node)
        node = PARENT[request][node]
    return nodes[::-1]


def conv_reference(x, state, weight, bias):
    """x [B, DIM, W], state [B, DIM, KW - 1]: silu conv of each node's path window."""
    out = torch.empty_like(x)
    for b in range(x.shape[0]):
        for node in range(W):
            seq = torch.cat([state[b], x[b][:, path(b, node)]], dim=1)[:, -KW:]
            out[b, :, node] = F.silu((seq * weight).sum(-1) + bias)
    return out


def gdn_reference(q, k, v, a, b, a_log, dt_bias, state):
    """Per node: the gated delta rule along the root-to-node path, from the request's state."""
    g = -torch.exp(a_log) * F.softplus(a + dt_bias)  # [T, HV]
    beta = torch.sigmoid(b)
    qn = F.normalize(q[0], dim=-1).repeat_interleave(HV // H, 1) * DK**-0.5
    kn = F.normalize(k[0], dim=-1).repeat_interleave(HV // H, 1)
    out = torch.empty_like(v[0])
    for r in range(len(PARENT)):
        for node in range(W):
            s = state[r].clone()  # [HV, DV, DK]
            for step in path(r, node):
                t = r * W + step
                s = s * torch.exp(g[t])[:, None, None]
                delta = (v[0, t] - torch.einsum("hvk,hk->hv", s, kn[t])) * beta[t][:, None]
                s = s + delta[:, :, None] * kn[t][:, None, :]
            t = r * W + node
            out[t] = torch.einsum("hvk,hk->hv", s, qn[t])
    return out


def run_conv(x, state, weight, bias, links: bool):
    dev = x.device
    from sglang.kernels.ops.mamba.causal_conv1d_triton import causal_conv1d_update

    batch = x.shape[0]
    kwargs = {}
    if links:
        kwargs = {
            "retrieve_next_token": torch.tensor(NEXT, dtype=torch.int64, device=dev),
            "retrieve_next_sibling": torch.tensor(SIBLING, dtype=torch.int64, device=dev),
            "retrieve_parent_token": torch.empty((batch, W), dtype=torch.int64, device=dev),
        }
    window = torch.zeros((batch, W, DIM, KW - 1), device=dev)
    slots = torch.arange(batch, dtype=torch.int32, device=dev)
    out = causal_conv1d_update(
        x.clone(), state.clone(), weight, bias, "silu",
        conv_state_indices=slots,
        intermediate_conv_window=window,
        intermediate_state_indices=slots,
        **kwargs,
    )  # fmt: skip
    return out, kwargs.get("retrieve_parent_token")


def run_gdn(q, k, v, a, b, a_log, dt_bias, state, parents):
    from sglang.kernels.ops.attention.linear.fused_sigmoid_gating_recurrent import (
        fused_sigmoid_gating_delta_rule_update,
    )

    n, dev = len(PARENT), q.device
    slots = torch.arange(n, dtype=torch.int32, device=dev)
    o = fused_sigmoid_gating_delta_rule_update(
        A_log=a_log, a=a, dt_bias=dt_bias, softplus_beta=1.0, softplus_threshold=20.0,
        q=q, k=k, v=v, b=b,
        initial_state_source=state.clone(),
        initial_state_indices=slots,
        cu_seqlens=torch.arange(0, n * W + 1, W, dtype=torch.int32, device=dev),
        use_qk_l2norm_in_kernel=True,
        disable_state_update=True,
        intermediate_states_buffer=torch.zeros((n, W, HV, DV, DK), device=dev),
        intermediate_state_indices=slots,
        cache_steps=W,
        retrieve_parent_token=parents,
    )  # fmt: skip
    return o.reshape(n * W, HV, DV)


def check(device: str = "cpu") -> dict:
    """Run both kernels with the tree's links and without; return the record (`ok` when the
    tree matches the reference within the device's tolerance and the chain control misses)."""
    gen = torch.Generator().manual_seed(0)

    def randn(*shape: int, scale: float = 1.0) -> torch.Tensor:
        return (torch.randn(shape, generator=gen) * scale).to(device)

    n = len(PARENT)
    x, state = randn(n, DIM, W), randn(n, DIM, KW - 1)
    weight, bias = randn(DIM, KW, scale=0.5), randn(DIM, scale=0.1)
    ref = conv_reference(x, state, weight, bias)
    tree_out, parents = run_conv(x, state, weight, bias, links=True)
    chain_out, _ = run_conv(x, state, weight, bias, links=False)
    q, k = randn(1, n * W, H, DK), randn(1, n * W, H, DK)
    v = randn(1, n * W, HV, DV)
    a, b = randn(n * W, HV), randn(n * W, HV)
    a_log, dt_bias = randn(HV, scale=0.3), randn(HV)
    s0 = randn(n, HV, DV, DK, scale=0.3)
    gref = gdn_reference(q, k, v, a, b, a_log, dt_bias, s0)
    gtree = run_gdn(q, k, v, a, b, a_log, dt_bias, s0, parents)
    gchain = run_gdn(q, k, v, a, b, a_log, dt_bias, s0, None)
    rows = parents.tolist() if parents is not None else None
    record = {
        "check": "hybrid_tree_verify",
        "parents": rows,
        # the root's entry is the kernel's own (it starts from the cached state)
        "parents_ok": rows is not None and [r[1:] for r in rows] == [r[1:] for r in PARENT],
        "conv_tree_err": float((tree_out - ref).abs().max()),
        "conv_chain_err": float((chain_out - ref).abs().max()),
        "gdn_tree_err": float((gtree - gref).abs().max()),
        "gdn_chain_err": float((gchain - gref).abs().max()),
    }
    tol = TOLERANCE[torch.device(device).type]
    record["agrees"] = (
        record["parents_ok"] and max(record["conv_tree_err"], record["gdn_tree_err"]) < tol
    )
    record["control_caught"] = (
        min(record["conv_chain_err"], record["gdn_chain_err"]) > CONTROL_MIN_ERR
    )
    record["ok"] = record["agrees"] and record["control_caught"]
    return record


def main() -> None:
    print(json.dumps(check(sys.argv[1] if len(sys.argv) > 1 else "cpu")))


if __name__ == "__main__":
    main()
