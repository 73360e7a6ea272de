"""Capture a real push on sandbox hosts as a terminal shows it: the live grid in tmux at 80
and 200 columns (a frame mid-push and the screen at the end), then the same command piped
(no terminal: plain lines, the table at full width). Writes docs/terminal/*.txt.

    python -m ddtree_sandbox up --workdir /tmp/capture --hosts 4 --service stub --first-octet auto
    python bench/terminal_capture.py --inventory /tmp/capture/inventory.toml

Each push is rolled back afterwards (not captured), so the next one has work to do.
"""

from __future__ import annotations

import argparse
import shlex
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SESSION = "ddtree-capture"
DONE = "__capture_done__"


def tmux(*args: str) -> str:
    return subprocess.run(["tmux", *args], capture_output=True, text=True, check=False).stdout


def capture_in_tmux(command: list[str], width: int, mid_s: float) -> tuple[str, str]:
    """(a frame `mid_s` into the run, the screen plus scrollback at the end)."""
    tmux("kill-session", "-t", SESSION)
    shell = f"{shlex.join(command)}; echo {DONE} exit $?; sleep 3600"
    tmux("new-session", "-d", "-s", SESSION, "-x", str(width), "-y", "40", shell)
    started, mid = time.monotonic(), ""
    try:
        while True:
            screen = tmux("capture-pane", "-p", "-t", SESSION)
            if not mid and time.monotonic() - started >= mid_s:
                mid = screen
            if DONE in screen or DONE in tmux("capture-pane", "-p", "-S", "-", "-t", SESSION):
                return mid, tmux("capture-pane", "-p", "-S", "-", "-t", SESSION)
            if time.monotonic() - started > 900:
                raise RuntimeError("the push did not end within 900 s")
            time.sleep(0.25)
    finally:
        tmux("kill-session", "-t", SESSION)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--inventory", required=True)
    parser.add_argument("--patchset", default="ddtree@1.0.0")
    parser.add_argument("--out", default=str(REPO / "docs" / "terminal"))
    parser.add_argument("--mid-s", type=float, default=8.0, help="when the live frame is taken")
    args = parser.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    cli = [sys.executable, "-m", "ddtree_deploy"]
    push = [*cli, "push", "--all", "-p", args.patchset, "-i", args.inventory]
    rollback = [*cli, "rollback", "--all", "-i", args.inventory]
    shown = " ".join(["ddtree-deploy", *push[3:]])
    for width in (80, 200):
        mid, end = capture_in_tmux(push, width, args.mid_s)
        (out / f"push-{width}-live.txt").write_text(f"$ {shown}\n{mid.rstrip()}\n")
        (out / f"push-{width}-end.txt").write_text(
            end.rstrip().replace(shlex.join(push), shown) + "\n"
        )
        subprocess.run(rollback, capture_output=True, check=True, cwd=REPO)
    piped = subprocess.run(
        push, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=REPO
    )
    text = f"$ {shown} 2>&1 | cat\n{piped.stdout}exit {piped.returncode}\n"
    (out / "push-piped.txt").write_text(text)
    subprocess.run(rollback, capture_output=True, check=True, cwd=REPO)
    return 0


if __name__ == "__main__":
    sys.exit(main())
