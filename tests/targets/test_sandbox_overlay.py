"""Sandbox envs for sglang 0.5.23: the 0.5.13.post1 base env, shared, plus an overlay."""

from __future__ import annotations

import pytest

from ddtree_sandbox.baseenv import (
    read_requirement_pins,
    requirements_path,
    split_base_requirements,
)
from ddtree_sandbox.hosts import BASE_PTH_NAME, OVERLAY_PTH_NAME


def test_split_base_requirements():
    text = "# why\n-r requirements-sglang-0.5.13.post1.txt\nabc==1.0\n"
    base, rest = split_base_requirements(text)
    assert base == "requirements-sglang-0.5.13.post1.txt"
    assert read_requirement_pins(rest) == [("abc", "1.0")]
    assert split_base_requirements("abc==1.0\n") == (None, "abc==1.0\n")
    assert split_base_requirements("abc==1.0\n-r x.txt\n")[0] is None  # only a leading -r


def test_0523_list_is_the_0513_base_plus_what_differs():
    base, rest = split_base_requirements(requirements_path("0.5.23").read_text())
    assert base == "requirements-sglang-0.5.13.post1.txt"
    # tvm-ffi for the imports; xgrammar for serving (0.5.23 imports it unconditionally)
    assert read_requirement_pins(rest) == [("apache-tvm-ffi", "0.1.11"), ("xgrammar", "0.2.7")]
    assert split_base_requirements(requirements_path("0.5.13.post1").read_text())[0] is None
    assert OVERLAY_PTH_NAME < BASE_PTH_NAME  # site.py reads .pth files sorted: overlay first


def test_0513_list_is_the_0513post1_env_with_no_overlay():
    base, rest = split_base_requirements(requirements_path("0.5.13").read_text())
    assert base == "requirements-sglang-0.5.13.post1.txt"
    assert read_requirement_pins(rest) == []  # ensure_base_env builds no overlay for it


@pytest.mark.hosts
def test_0523_hosts_share_the_base_and_see_the_overlay_first(sandbox_factory, base_env):
    new = sandbox_factory(1, sglang_version="0.5.23")
    old = sandbox_factory(1)
    assert new.base_env.root == base_env.root and new.base_env.overlay_dir is not None
    assert base_env.overlay_dir is None
    probe = "import sys, tvm_ffi, sglang; print(tvm_ffi.__file__); print(sglang.__version__)"
    host = new.hosts[0]
    done = host.run([host.python, "-c", probe])
    assert done.returncode == 0, done.stderr[-2000:]
    tvm_file, version = done.stdout.split()
    assert tvm_file.startswith(str(new.base_env.overlay_dir)) and version == "0.5.23"
    site = old.hosts[0].site_packages_on_disk
    assert (site / BASE_PTH_NAME).is_file() and not (site / OVERLAY_PTH_NAME).exists()
    done = old.hosts[0].run([old.hosts[0].python, "-c", "import tvm_ffi"])
    assert done.returncode != 0 and "No module named 'tvm_ffi'" in done.stderr
