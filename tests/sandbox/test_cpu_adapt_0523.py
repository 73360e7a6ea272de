"""The 0.5.23 CPU fixture's sgl_kernel stand-in: present only while its modules load, and an
op it has no torch body for refuses loudly instead of doing nothing (no torch needed)."""

from __future__ import annotations

import sys

import pytest

from ddtree_sandbox import cpu_adapt, cpu_adapt_0523


def test_the_standin_exists_only_while_a_kernel_module_runs():
    seen = []
    assert "sgl_kernel" not in sys.modules
    cpu_adapt_0523.run_with_cpu_ops(lambda: seen.append(sys.modules["sgl_kernel"]))
    assert "sgl_kernel" not in sys.modules
    assert seen[0].assign_extend_cache_locs_cpu is cpu_adapt_0523.assign_extend_cache_locs_cpu


def test_an_op_without_a_torch_body_refuses_when_called():
    standin = cpu_adapt_0523.cpu_ops_standin()
    with pytest.raises(NotImplementedError, match="verify_tree_greedy_cpu has no CPU stand-in"):
        standin.verify_tree_greedy_cpu()
    with pytest.raises(AttributeError):
        standin.__file__  # noqa: B018 (inspect and importlib probe dunders)


def test_0523_gets_its_own_adapters_and_0513_keeps_the_old_ones(monkeypatch):
    monkeypatch.setattr(cpu_adapt, "installed_sglang_version", lambda: "0.5.23")
    finder = cpu_adapt.select_finder()
    assert finder.patches["sglang.srt.arg_groups.speculative_hook"].__name__ == (
        "adapt_speculative_device"
    )
    assert "sglang.kernels.ops.speculative.eagle" in finder.arounds
    monkeypatch.setattr(cpu_adapt, "installed_sglang_version", lambda: "0.5.13.post1")
    finder = cpu_adapt.select_finder()
    assert finder.patches is cpu_adapt.PATCHES and not finder.arounds


def test_the_torch_ops_read_and_write_each_requests_window():
    """The ops' torch bodies against a plain-Python reading of what the kernels do."""
    torch = pytest.importorskip("torch")
    ops = cpu_adapt_0523
    table = torch.arange(4 * 10).view(4, 10)  # req_to_token: row r holds r*10 .. r*10+9
    rows, starts, ends = torch.tensor([2, 0]), torch.tensor([3, 7]), torch.tensor([6, 9])
    out = torch.zeros(5, dtype=torch.int64)
    ops.assign_extend_cache_locs_cpu(rows, table, starts, ends, out, 10)
    assert out.tolist() == [23, 24, 25, 7, 8]
    written = torch.zeros(4, 10, dtype=torch.int64)
    ops.assign_req_to_token_pool_cpu(rows, written, starts, ends, torch.arange(100, 105), 10)
    assert written[2, 3:6].tolist() == [100, 101, 102] and written[0, 7:9].tolist() == [103, 104]
    assert int(written.count_nonzero()) == 5
    drafts = torch.zeros(4, dtype=torch.int64)
    ops.assign_draft_cache_locs_contiguous_cpu(rows, table, torch.tensor([1, 5]), drafts, 10, 1, 2)
    assert drafts.tolist() == [21, 22, 5, 6]
    bonus = torch.zeros(2, dtype=torch.int64)
    accepted = torch.tensor([[7, 8, 9], [4, 5, 6]])
    ops.fill_bonus_tokens_cpu(accepted, torch.tensor([2, 3]), bonus, 3)
    assert bonus.tolist() == [8, 6]
    slots = torch.zeros(4, dtype=torch.int64)
    index = torch.tensor([[0, 2, -1], [3, -1, -1]])
    ops.fill_accept_out_cache_loc_cpu(index, torch.tensor([40, 41, 42, 43]), slots)
    assert slots[:3].tolist() == [40, 42, 43]
