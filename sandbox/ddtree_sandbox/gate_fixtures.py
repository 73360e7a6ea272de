"""DDTree versions for the serving gate (issue #20): each one imports, starts, serves and
passes the push's one-shot `server` suite on host0's target, and only a gate that compares
the restarted server with its own baseline (the old server's numbers) can catch it.

Each is ddtree 1.1.0 with a few text edits, re-versioned and re-locked, like broken.py:

- ``clamp``: every tree is built with budget 1 whatever the flag says: still lossless, but
  the control target's accept length drops from 4.0 (DFLASH, 1.1.0) to 2.0 (caught by the
  gate's accept-length comparison; on the control target the push's `acceptance` check
  also fails it, through the control reference's own floor of 3.0).
- ``slow``: each verify sleeps twice the time the step took before it (draft + target
  forward, 20 ms at least, 250 ms at most): same tokens, about 3x fewer tokens/s than 1.1.0
  on any machine (caught by the gate's tokens/s comparison). A fixed sleep slowed a fast
  machine 2.8x and a slower CI runner only 2.0x, at the quick gate's -50% edge.
- ``crawl``: ``slow`` with a sleep of 9x the step (90 ms at least, 500 ms at most): about
  10x fewer tokens/s, so far below any noise band that it is caught even against a base
  that is itself slower than 1.1.0 (``export --verify``'s DFLASH base image: ``slow`` comes
  out near -46% there, inside the CPU threshold; ``crawl`` near -85%).
- ``greedy``: the tree mask of broken.py's ``mask``, and no [lossless] table (no references),
  so the push compares no outputs: greedy output differs from the old server's (caught by
  the gate's greedy-output comparison).
- ``hang``: serves the first N distinct requests that reach verify (N from
  ``$DDTREE_GATE_HANG_AFTER``, default 60), then blocks the scheduler for good: the push's
  17 verify requests and the gate's warm-up and replay (2 + 3 x 8) pass, the load's never
  answer (caught by the gate's errors/timeouts under load
  over the bake period).
"""

from __future__ import annotations

import json
import shutil
import tomllib
from dataclasses import dataclass
from pathlib import Path

from ddtree_sandbox.broken import SPECULATIVE, VARIANTS, copy_with_edits

INFO = f"{SPECULATIVE}/ddtree_info.py"
HANG_AFTER_ENV = "DDTREE_GATE_HANG_AFTER"
HANG_AFTER_DEFAULT = 60
SLOW_FACTOR = 2.0
SLOW_MIN_S = 0.02
SLOW_MAX_S = 0.25
CRAWL = (9.0, 0.09, 0.5)  # crawl's (factor, least, most sleep in s)

# Anchors in ddtree_info.py of 1.1.0, each there once.
_IMPORTS = "import logging\n"
_VERIFY_BODY = "        tree = self.tree\n        posterior = self._target_tokens("
_VERIFY_CLASS = "@dataclass\nclass DDTreeVerifyInput("


def _slow_helper(factor: float, least_s: float, most_s: float) -> str:
    """The source of the sleep a slow fixture's verify runs first: ``factor`` x the time
    since the last verify ended, clamped to [least_s, most_s]."""
    return f'''_GATE_FIXTURE_LAST_END = [0.0]


def _gate_fixture_slow() -> None:
    """Gate fixture: sleep {factor:g}x the time since the last verify ended."""
    now = time.monotonic()
    gap = now - _GATE_FIXTURE_LAST_END[0]
    time.sleep(min({most_s}, max({least_s}, {factor} * gap)))
    _GATE_FIXTURE_LAST_END[0] = time.monotonic()


'''


def _slow_edits(factor: float, least_s: float, most_s: float) -> tuple[tuple[str, str, str], ...]:
    """The edits that make 1.1.0's verify sleep (see `_slow_helper`)."""
    return (
        (INFO, _IMPORTS, "import logging\nimport time\n"),
        (INFO, _VERIFY_CLASS, _slow_helper(factor, least_s, most_s) + _VERIFY_CLASS),
        (INFO, _VERIFY_BODY, f"        _gate_fixture_slow()\n{_VERIFY_BODY}"),
    )


_HANG_HELPER = f'''_GATE_FIXTURE_SEEN_RIDS: set[str] = set()


def _gate_fixture_hang(reqs: list[Any]) -> None:
    """Gate fixture `hang`: once more than N distinct requests reached verify, block forever."""
    _GATE_FIXTURE_SEEN_RIDS.update(str(req.rid) for req in reqs)
    limit = int(os.environ.get("{HANG_AFTER_ENV}", "{HANG_AFTER_DEFAULT}"))
    if len(_GATE_FIXTURE_SEEN_RIDS) > limit:
        logger.warning("gate fixture hang: request %d reached verify, blocking", limit + 1)
        while True:
            time.sleep(3600)


'''


@dataclass(frozen=True)
class GateVariant:
    """One gate fixture: ``edits`` as ``(rel, old, new)``; ``drop_lossless`` also removes
    [lossless] and the reference files (the push then compares no outputs)."""

    version: str
    edits: tuple[tuple[str, str, str], ...]
    what: str
    drop_lossless: bool = False


_MASK = VARIANTS["mask"]

GATE_VARIANTS: dict[str, GateVariant] = {
    "clamp": GateVariant(
        "1.1.5",
        ((INFO, "build_ddtree_tree_from_logits(logits[b], budget)",
          "build_ddtree_tree_from_logits(logits[b], 1)"),),
        "tree budget clamped to 1 node: lossless, accept length <= 2.0",
        drop_lossless=True,
    ),
    "slow": GateVariant(
        "1.1.6",
        _slow_edits(SLOW_FACTOR, SLOW_MIN_S, SLOW_MAX_S),
        f"verify sleeps {SLOW_FACTOR:g}x the step before it: about 3x fewer tokens/s",
    ),
    "crawl": GateVariant(
        "1.1.20",
        _slow_edits(*CRAWL),
        f"verify sleeps {CRAWL[0]:g}x the step before it: about 10x fewer tokens/s",
    ),
    "greedy": GateVariant(
        "1.1.7",
        ((_MASK.rel, _MASK.old, _MASK.new),),
        "tree mask dropped and no [lossless]: greedy output changes, unchecked by the push",
        drop_lossless=True,
    ),
    "hang": GateVariant(
        "1.1.8",
        ((INFO, _IMPORTS, "import logging\nimport os\nimport time\n"),
         (INFO, _VERIFY_CLASS, _HANG_HELPER + _VERIFY_CLASS),
         (INFO, _VERIFY_BODY, f"        _gate_fixture_hang(batch.reqs)\n{_VERIFY_BODY}")),
        f"the scheduler blocks for good after {HANG_AFTER_DEFAULT} requests",
    ),
}  # fmt: skip


def build_gate_patchset(source: Path, out_base: Path, variant: str) -> str:
    """Copy ddtree 1.1.0 at ``source`` to ``out_base/ddtree/<version>`` as gate fixture
    ``variant``, lock it, and return its ref (``ddtree@1.1.x``). A variant without
    [lossless] ships its prompts as the gate's own (``gate/prompts.jsonl``, [gate] prompts).

    Raises ValueError when a text to change is not in the source exactly once.
    """
    from ddtree_deploy.patchset import load_patchset, write_lock

    fixture = GATE_VARIANTS[variant]
    root = copy_with_edits(source, out_base, fixture.version, fixture.edits, variant)
    # The gate is what these exist to test: the install-time suites that import the code in
    # fresh processes (imports, ddtree, gpu: ~45 s a push on 2 cores) are proven by 1.1.0's
    # own tests, so the fixtures keep integrity and compile (and `server` after the restart).
    spec_path = root / "patchset.toml"
    spec_text = spec_path.read_text()
    suites_line = 'suites = ["integrity", "compile", "imports", "ddtree", "gpu"]'
    if spec_text.count(suites_line) != 1:
        raise ValueError(f"{spec_path}: no single {suites_line!r} for {variant!r}")
    spec_path.write_text(spec_text.replace(suites_line, 'suites = ["integrity", "compile"]'))
    if fixture.drop_lossless:
        # the lossless prompts become the gate's own prompts file ([gate] prompts, locked)
        spec = tomllib.loads((root / "patchset.toml").read_text())
        prompts = "".join(json.dumps(p) + "\n" for p in spec["lossless"]["prompts"])
        drop_lossless(root / "patchset.toml", variant)
        shutil.rmtree(root / "reference", ignore_errors=True)
        (root / "gate").mkdir()
        (root / "gate" / "prompts.jsonl").write_text(prompts)
        with (root / "patchset.toml").open("a") as spec_file:
            spec_file.write('\n[gate]\nprompts = "gate/prompts.jsonl"\n')
    write_lock(load_patchset(root))
    return f"ddtree@{fixture.version}"


def drop_lossless(spec_path: Path, variant: str) -> None:
    """Cut the [lossless] table (the last one, with the comment block above it) from
    ``spec_path``. Raises ValueError when it is not there once or not last."""
    text = spec_path.read_text()
    table = "\n[lossless]\n"
    if text.count(table) != 1 or text.count("\n[", text.index(table) + 1) != 0:
        raise ValueError(f"{spec_path}: no single last [lossless] table for {variant!r}")
    start = text.index(table)
    comment = text.rfind("\n\n", 0, start)  # the comment block sits right above the table
    spec_path.write_text(text[: comment if comment != -1 else start].rstrip("\n") + "\n")
