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
