"""`new_patchset(request, source)`: what `patchset new` hands off to, called as a library
(no CLI): the request is checked before the source is read, the source is fed the wheel."""

from __future__ import annotations

from pathlib import Path

import pytest

from ddtree_deploy.errors import PatchsetError
from ddtree_deploy.patchset import load_patchset, verify_patchset
from ddtree_deploy.patchset.author import (
    NewPatchset,
    PatchsetPlan,
    WrittenPatchset,
    new_patchset,
)
from ddtree_deploy.patchset.capture import Capture, capture_from_tree
from tests.patchset.test_author_capture import TARGET, with_ddtree


def test_a_request_writes_a_locked_patchset_from_its_source(ddtree_site, wheel, tmp_path):
    patchsets = with_ddtree(tmp_path, "1.0.0")
    fed: list[Path] = []

    def source(given: Path) -> Capture:
        fed.append(given)
        return capture_from_tree(ddtree_site, given, "sglang")

    request = NewPatchset.parse(patchsets, "mine@1.0.0", TARGET, "mine", like="ddtree@1.0.0")
    assert (request.ref, request.like is not None) == ("mine@1.0.0", True)
    planned = new_patchset(request, source, dry_run=True)
    assert isinstance(planned, PatchsetPlan) and not request.root.exists()
    written = new_patchset(request, source)
    assert isinstance(written, WrittenPatchset) and written.root == request.root
    assert fed == [wheel, wheel]
    verify_patchset(load_patchset(request.root))
    with pytest.raises(PatchsetError, match="already exists"):
        new_patchset(request, source)  # a released version never changes


def test_a_bad_request_is_refused_before_any_source_is_read(tmp_path):
    patchsets = with_ddtree(tmp_path, "1.0.0")
    with pytest.raises(PatchsetError, match="already exists"):
        NewPatchset.parse(patchsets, "ddtree@1.0.0", TARGET)
    with pytest.raises(PatchsetError, match="expected PACKAGE==VERSION"):
        NewPatchset.parse(patchsets, "mine@1.0.0", "sglang")
    with pytest.raises(PatchsetError, match="give the new patchset as NAME@VERSION"):
        NewPatchset.parse(patchsets, "mine", TARGET)
    with pytest.raises(PatchsetError):
        NewPatchset.parse(patchsets, "mine@1.0.0", TARGET, like="nosuch@9.9.9")
