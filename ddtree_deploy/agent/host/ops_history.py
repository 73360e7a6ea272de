"""The history op: the deploys a host's journal remembers, with its rotated files (read
only; `ddtree-deploy history`)."""

import json

from .state import JOURNAL_KEEP_ROTATED, read_entries
from .wire import JournalState
from .wire_results import HistoryResult


def journal_files(ctx):
    """Return the journal's files, oldest first: journal.jsonl.3 .. .1, then journal.jsonl."""
    rotated = ["%s.%d" % (ctx.journal_path, n) for n in range(JOURNAL_KEEP_ROTATED, 0, -1)]
    return rotated + [ctx.journal_path]


def op_history(ctx, args):
    """Return a HistoryResult: the entries of the last `args.deploys` deploys (those
    started most recently), oldest first, each entry once.

    A rotation carries the latest entry of recent deploys into the new journal ("carried":
    true); that copy is dropped when the entry it copies is still in a rotated file, and
    kept when that file is gone. Unreadable lines are counted, not returned. Raises
    OSError only for a journal file that exists but cannot be read.
    """
    seen, entries, corrupt = set(), [], 0
    for path in journal_files(ctx):
        for entry in read_entries(path):
            if entry.get("state") == JournalState.CORRUPT or "deploy_id" not in entry:
                corrupt += 1
                continue
            key = json.dumps(
                {k: v for k, v in entry.items() if k != "carried"}, sort_keys=True, default=str
            )
            if key in seen:
                continue
            seen.add(key)
            entries.append(entry)
    started = list(dict.fromkeys(e["deploy_id"] for e in entries))
    kept = set(started[len(started) - args.deploys :]) if args.deploys > 0 else set()
    return HistoryResult(
        entries=[e for e in entries if e["deploy_id"] in kept],
        deploys=len(started),
        corrupt=corrupt,
    )
