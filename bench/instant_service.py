"""A service whose start is instant: the benchmark's stand-in for a server on each host.

Copied to ``/srv/service/instant_service.py`` on every sandbox host and run by the host's
python (stdlib only). ``start`` binds the port *before* it returns, then leaves a detached
child serving ``GET /health_generate``, so the first health poll already answers. Usage:
``python instant_service.py start|stop|status``. Settings come from ``instant.json`` beside
it: ``host``, ``port``, and optionally ``marker_file`` + ``marker`` — when that file holds
the marker at start, health answers 503 forever (a patch that breaks the server, for the
rollback benchmark). Exit codes: ``status`` 0 running, 3 stopped; others 0 ok, 1 failed.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import sys
import time
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path

HERE = Path(__file__).resolve().parent
CONFIG_FILE = HERE / "instant.json"
PID_FILE = HERE / "instant.pid"


def load_config() -> dict:
    return json.loads(CONFIG_FILE.read_text())


def read_pid() -> int | None:
    try:
        pid = int(PID_FILE.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return None if stat[stat.rfind(")") + 2 :].startswith("Z") else pid


def is_broken(config: dict) -> bool:
    """True when the configured marker file holds the marker (the 'patch' broke us)."""
    marker_file, marker = config.get("marker_file"), config.get("marker")
    if not marker_file or not marker:
        return False
    try:
        return marker.encode() in Path(marker_file).read_bytes()
    except OSError:
        return False


class Handler(BaseHTTPRequestHandler):
    status_code = 200

    def do_GET(self) -> None:  # the name http.server calls
        body = b"ok\n" if self.status_code == 200 else b"broken\n"
        self.send_response(self.status_code)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


def cmd_start() -> int:
    if read_pid() is not None:
        return 0
    config = load_config()
    Handler.status_code = 503 if is_broken(config) else 200
    server = HTTPServer((config["host"], int(config["port"])), Handler, bind_and_activate=False)
    server.socket.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    server.server_bind()
    server.server_activate()  # listening now: health connects queue until the child accepts
    pid = os.fork()
    if pid == 0:
        os.setsid()
        devnull = os.open(os.devnull, os.O_RDWR)
        for fd in (0, 1, 2):
            os.dup2(devnull, fd)  # let the caller's pipes close, or ssh/subprocess would wait
        signal.signal(signal.SIGTERM, lambda *_: os._exit(0))
        server.serve_forever(poll_interval=0.5)
        os._exit(0)
    server.socket.close()
    PID_FILE.write_text(f"{pid}\n")
    return 0


def cmd_stop() -> int:
    pid = read_pid()
    if pid is None:
        PID_FILE.unlink(missing_ok=True)
        return 0
    os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + 5
    while read_pid() is not None and time.monotonic() < deadline:
        time.sleep(0.005)
    if read_pid() is not None:
        return 1
    PID_FILE.unlink(missing_ok=True)
    return 0


def cmd_status() -> int:
    return 0 if read_pid() is not None else 3


def main() -> int:
    command = sys.argv[1] if len(sys.argv) > 1 else ""
    actions = {"start": cmd_start, "stop": cmd_stop, "status": cmd_status}
    if command not in actions:
        print("usage: instant_service.py start|stop|status", file=sys.stderr)
        return 2
    return actions[command]()


if __name__ == "__main__":
    sys.exit(main())
