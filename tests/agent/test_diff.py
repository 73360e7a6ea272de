"""The strict unified-diff applier shared by the lock and the agent, checked against GNU patch."""

from __future__ import annotations

import random
import shutil
import subprocess

import pytest

from ddtree_deploy.agent.host.pure import apply_unified_diff


def gnu_diff(tmp_path, old: str, new: str) -> str:
    (tmp_path / "a").mkdir(exist_ok=True)
    (tmp_path / "b").mkdir(exist_ok=True)
    (tmp_path / "a" / "f.py").write_text(old)
    (tmp_path / "b" / "f.py").write_text(new)
    done = subprocess.run(
        ["diff", "-u", "a/f.py", "b/f.py"], cwd=tmp_path, capture_output=True, text=True
    )
    return done.stdout


@pytest.mark.skipif(shutil.which("diff") is None, reason="needs GNU diff")
def test_random_edits_round_trip_like_gnu_patch(tmp_path):
    rng = random.Random(7)
    for case in range(60):
        old_lines = [f"line {i} {rng.random():.3f}\n" for i in range(rng.randint(0, 40))]
        new_lines = list(old_lines)
        for _ in range(rng.randint(1, 5)):
            op = rng.choice(["ins", "del", "chg"])
            pos = rng.randint(0, len(new_lines))
            if op == "ins" or not new_lines:
                new_lines.insert(pos, f"added {case} {pos}\n")
            elif op == "del":
                del new_lines[min(pos, len(new_lines) - 1)]
            else:
                new_lines[min(pos, len(new_lines) - 1)] = f"changed {case}\n"
        old, new = "".join(old_lines), "".join(new_lines)
        if rng.random() < 0.2 and new:
            new = new.rstrip("\n")  # exercise "\ No newline at end of file"
        diff = gnu_diff(tmp_path, old, new)
        if not diff:
            continue
        assert apply_unified_diff(old, diff) == new, f"case {case}"


def test_refuses_a_diff_whose_context_differs():
    diff = "--- a/f\n+++ b/f\n@@ -1,2 +1,2 @@\n one\n-two\n+TWO\n"
    assert apply_unified_diff("one\ntwo\n", diff) == "one\nTWO\n"
    with pytest.raises(ValueError, match="does not apply at base line 2"):
        apply_unified_diff("one\nthree\n", diff)


def test_refuses_offset_hunks():
    """No fuzz, no offset: the same edit one line lower is refused, not relocated."""
    diff = "--- a/f\n+++ b/f\n@@ -1,2 +1,2 @@\n one\n-two\n+TWO\n"
    with pytest.raises(ValueError):
        apply_unified_diff("zero\none\ntwo\n", diff)


def test_refuses_garbage():
    with pytest.raises(ValueError, match="no hunks"):
        apply_unified_diff("x\n", "not a diff\n")


def test_refuses_a_truncated_diff_by_its_hunk_counts():
    """A diff cut short still matches its context; the header's line counts give it away."""
    diff = "--- a/f\n+++ b/f\n@@ -1,3 +1,3 @@\n one\n-two\n+TWO\n three\n"
    assert apply_unified_diff("one\ntwo\nthree\n", diff) == "one\nTWO\nthree\n"
    with pytest.raises(ValueError, match=r"diff line 3: .* 3 old and 3 new .* 2 and 2 .*trunc"):
        apply_unified_diff("one\ntwo\nthree\n", diff[: diff.rindex(" three")])
    short_header = "--- a/f\n+++ b/f\n@@ -1 +1 @@\n-one\n+ONE\n"  # counts default to 1
    assert apply_unified_diff("one\n", short_header) == "ONE\n"
    insert_at_top = "--- a/f\n+++ b/f\n@@ -0,0 +1 @@\n+zero\n"
    assert apply_unified_diff("one\n", insert_at_top) == "zero\none\n"


def test_classify_file_names_where_a_file_stands():
    from ddtree_deploy.agent.host.pure import classify_file, sha256_bytes, sha256_file

    assert [classify_file(c, "b", "r", ("u",)) for c in ("r", "b", "u", "x", None)] == [
        "unchanged", "pending", "upgrade", "drifted", "drifted"
    ]  # fmt: skip
    assert sha256_file("/no/such/file") is None
    assert sha256_bytes(b"") == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
