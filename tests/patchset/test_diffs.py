"""The diffs we write apply back to their base exactly, with our own applier."""

from __future__ import annotations

import random

import pytest

from ddtree_deploy.agent.host.pure import apply_unified_diff
from ddtree_deploy.errors import PatchsetError
from ddtree_deploy.patchset.diffs import NO_EOL, unified_diff

CASES = [
    ("a\nb\nc\n", "a\nB\nc\n"),
    ("a\nb", "a\nb\nc"),
    ("a\nb\n", "a\nb"),
    ("", "x\n"),
    ("x\n", ""),
    ("a\r\nb\r\n", "a\r\nc\r\n"),
]


@pytest.mark.parametrize(("base", "result"), CASES)
def test_a_written_diff_rebuilds_the_result(base: str, result: str) -> None:
    diff = unified_diff("sglang/x.py", base, result)
    assert diff.startswith("--- a/sglang/x.py\n+++ b/sglang/x.py\n")
    assert apply_unified_diff(base, diff) == result


def test_a_missing_final_newline_is_marked() -> None:
    assert NO_EOL in unified_diff("sglang/x.py", "a\nb\n", "a\nb")


def test_equal_texts_give_no_diff() -> None:
    assert unified_diff("sglang/x.py", "same\n", "same\n") == ""


def test_random_pairs_round_trip() -> None:
    rnd = random.Random(7)
    pieces = ["a\n", "b\n", "c\n", "d", "e\n"]
    for _ in range(500):
        base = "".join(rnd.choice(pieces) for _ in range(rnd.randint(0, 12)))
        result = "".join(rnd.choice(pieces) for _ in range(rnd.randint(0, 12)))
        if base != result:
            assert apply_unified_diff(base, unified_diff("p", base, result)) == result


def test_a_lone_carriage_return_is_refused() -> None:
    with pytest.raises(PatchsetError, match="cannot rebuild"):
        unified_diff("sglang/x.py", "a\rb\n", "a\rc\n")
