"""sglang 0.5.23's Triton conv-update and GDN recurrent verify kernels, walking TREE parents
(the links DDTREE 2.2.0 hands the hybrid backend), against a per-node torch reference: node i's
output must be what a plain sequential run over its root-to-node path gives.

Run by tests/kernels/test_hybrid_tree_verify.py with the sandbox base env's python, the
pristine sglang 0.5.23 on sys.path and TRITON_INTERPRET=1 (the CPU). Prints one JSON line:
the largest error of each kernel with the tree's links and with none (the control: a chain
scan over the same slots must NOT match the tree reference).
"""

from __future__ import annotations

import json

import torch
import torch.nn.functional as F

# Two requests, W = 6 slots each (slot 0 the root): a branching tree and a chain.
NEXT = [[1, 3, 4, 5, -1, -1], [1, 2, 3, 4, 5, -1]]
SIBLING = [[-1, 2, -1, -1, -1, -1], [-1, -1, -1, -1, -1, -1]]
PARENT = [[-1, 0, 0, 1, 2, 3], [-1, 0, 1, 2, 3, 4]]
W, DIM, KW = 6, 8, 4  # slots, conv channels, conv kernel width
H, HV, DK, DV = 1, 2, 8, 8  # GDN key heads, value heads, head dims


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
    from sglang.kernels.ops.mamba.causal_conv1d_triton import causal_conv1d_update

    batch = x.shape[0]
    kwargs = {}
    if links:
        kwargs = {
            "retrieve_next_token": torch.tensor(NEXT, dtype=torch.int64),
            "retrieve_next_sibling": torch.tensor(SIBLING, dtype=torch.int64),
            "retrieve_parent_token": torch.empty((batch, W), dtype=torch.int64),
        }
    window = torch.zeros((batch, W, DIM, KW - 1))
    out = causal_conv1d_update(
        x.clone(), state.clone(), weight, bias, "silu",
        conv_state_indices=torch.arange(batch, dtype=torch.int32),
        intermediate_conv_window=window,
        intermediate_state_indices=torch.arange(batch, dtype=torch.int32),
        **kwargs,
    )  # fmt: skip
    return out, kwargs.get("retrieve_parent_token")


def run_gdn(q, k, v, a, b, a_log, dt_bias, state, parents):
    from sglang.kernels.ops.attention.linear.fused_sigmoid_gating_recurrent import (
        fused_sigmoid_gating_delta_rule_update,
    )

    n = len(PARENT)
    o = fused_sigmoid_gating_delta_rule_update(
        A_log=a_log, a=a, dt_bias=dt_bias, softplus_beta=1.0, softplus_threshold=20.0,
        q=q, k=k, v=v, b=b,
        initial_state_source=state.clone(),
        initial_state_indices=torch.arange(n, dtype=torch.int32),
        cu_seqlens=torch.arange(0, n * W + 1, W, dtype=torch.int32),
        use_qk_l2norm_in_kernel=True,
        disable_state_update=True,
        intermediate_states_buffer=torch.zeros((n, W, HV, DV, DK)),
        intermediate_state_indices=torch.arange(n, dtype=torch.int32),
        cache_steps=W,
        retrieve_parent_token=parents,
    )  # fmt: skip
    return o.reshape(n * W, HV, DV)


def main() -> None:
    gen = torch.Generator().manual_seed(0)
    n = len(PARENT)
    x = torch.randn((n, DIM, W), generator=gen)
    state = torch.randn((n, DIM, KW - 1), generator=gen)
    weight = torch.randn((DIM, KW), generator=gen) * 0.5
    bias = torch.randn((DIM,), generator=gen) * 0.1
    ref = conv_reference(x, state, weight, bias)
    tree_out, parents = run_conv(x, state, weight, bias, links=True)
    chain_out, _ = run_conv(x, state, weight, bias, links=False)
    q = torch.randn((1, n * W, H, DK), generator=gen)
    k = torch.randn((1, n * W, H, DK), generator=gen)
    v = torch.randn((1, n * W, HV, DV), generator=gen)
    a, b = torch.randn((n * W, HV), generator=gen), torch.randn((n * W, HV), generator=gen)
    a_log, dt_bias = torch.randn((HV,), generator=gen) * 0.3, torch.randn((HV,), generator=gen)
    s0 = torch.randn((n, HV, DV, DK), generator=gen) * 0.3
    gref = gdn_reference(q, k, v, a, b, a_log, dt_bias, s0)
    gtree = run_gdn(q, k, v, a, b, a_log, dt_bias, s0, parents)
    gchain = run_gdn(q, k, v, a, b, a_log, dt_bias, s0, None)
    print(json.dumps({
        "parents": parents.tolist() if parents is not None else None,
        # the root's entry is the kernel's own (it starts from the cached state)
        "parents_ok": parents is not None
        and [row[1:] for row in parents.tolist()] == [row[1:] for row in PARENT],
        "conv_tree_err": float((tree_out - ref).abs().max()),
        "conv_chain_err": float((chain_out - ref).abs().max()),
        "gdn_tree_err": float((gtree - gref).abs().max()),
        "gdn_chain_err": float((gchain - gref).abs().max()),
    }))  # fmt: skip


if __name__ == "__main__":
    main()
