"""A host-side STAND-IN for the ddtree agent, for controller-only TIMING runs (scenario B-ctl).

NOT an agent and never used by a correctness test: it runs nothing on the host. It speaks
the agent's wire framing only: read the bundle line (ignored), then for each request line
write the next pre-recorded answer (recorded from a real push on a real sandbox host by
bench/ddtree_push.py, DDTREE_BENCH_RECORD), each ending with the agent's END sentinel line,
exactly as the real agent would have sent it. At EOF, exit 0.

Usage (an sshd ForceCommand, bench/standin_sshd.py): ``python3 -S standin_agent.py FRAMES``
where FRAMES is {"frames": [answer, ...]}. Stdlib only, imports as little as it can: its
python start is host-side work, like the real agent's.

Exit codes: 0 every request answered and EOF read; 3 a request came after the last recorded
answer (the push asked more than the recording holds: the stand-in no longer fits it).
"""

from __future__ import annotations

import json
import sys
from typing import BinaryIO

MORE_REQUESTS_THAN_RECORDED = 3


def replay(frames: list[bytes], stdin: BinaryIO, stdout: BinaryIO) -> int:
    """Answer each request line on ``stdin`` with the next of ``frames`` on ``stdout``.

    The first line (the agent bundle) gets no answer. Returns the exit code: 0 when stdin
    ended with no request left unanswered, MORE_REQUESTS_THAN_RECORDED when a request came
    after the last frame.
    """
    if not stdin.readline():  # the bundle; EOF before it: nothing was asked
        return 0
    for frame in frames:
        if not stdin.readline():
            return 0
        stdout.write(frame)
        stdout.flush()
    return MORE_REQUESTS_THAN_RECORDED if stdin.readline() else 0


def load_frames(text: str) -> list[bytes]:
    """The answers of a recording file's text ({"frames": [str, ...]}), as bytes."""
    return [frame.encode() for frame in json.loads(text)["frames"]]


def main() -> int:
    with open(sys.argv[1]) as fh:
        frames = load_frames(fh.read())
    return replay(frames, sys.stdin.buffer, sys.stdout.buffer)


if __name__ == "__main__":
    sys.exit(main())
