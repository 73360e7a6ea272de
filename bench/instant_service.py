"""A service whose start is instant: the benchmark's stand-in for a server on each host.

Copied to ``/srv/service/instant_service.py`` on every sandbox host and run by the host's
python (stdlib only). ``start`` binds the port *before* it returns, then leaves a detached
child answering every HTTP request (``GET /health_generate``), so the first health poll
already answers. Usage: ``python instant_service.py start|stop|status``. Settings come from
``instant.json`` beside it: ``host``, ``port``, and optionally ``marker_file`` + ``marker`` —
when that file holds the marker at start, health answers 503 forever (a patch that breaks
the server, for the rollback benchmark). Exit codes: ``status`` 0 running, 3 stopped;
others 0 ok, 1 failed.

Cost. Every tool under test runs these commands (a restart is stop + start, and ours adds
status), so what they cost on top of the host's python start is the stand-in's, not the
tool's. Each action imports only what it uses: ``stop`` and ``status`` read a pid file
(``os``, ``signal``, ``time``), ``start`` adds ``json`` and ``socket``. The child answers
with a fixed response over a bare socket instead of ``http.server``, whose import (with
``http.client``, ``email``, ``ssl``) took ~45 ms of the ~100 ms each command cost on a
sandbox host (a bare ``python -c pass`` there: ~31 ms).
"""

import os
import signal
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
CONFIG_FILE = os.path.join(HERE, "instant.json")
PID_FILE = os.path.join(HERE, "instant.pid")
RESPONSES = {
    200: b"HTTP/1.0 200 OK\r\nContent-Length: 3\r\nConnection: close\r\n\r\nok\n",
    503: b"HTTP/1.0 503 Service Unavailable\r\nContent-Length: 7\r\nConnection: close\r\n\r\n"
    b"broken\n",
}


def load_config() -> dict:
    import json

    with open(CONFIG_FILE) as f:
        return json.load(f)


def read_pid() -> int | None:
    """The server child's pid from the pid file, or None when it is not running."""
    try:
        with open(PID_FILE) as f:
            pid = int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        return None
    try:
        with open(f"/proc/{pid}/stat") as f:
            stat = f.read()
    except OSError:
        return None
    return None if stat[stat.rfind(")") + 2 :].startswith("Z") else pid


def is_broken(config: dict) -> bool:
    """True when the configured marker file holds the marker (the 'patch' broke us)."""
    marker_file, marker = config.get("marker_file"), config.get("marker")
    if not marker_file or not marker:
        return False
    try:
        with open(marker_file, "rb") as f:
            return marker.encode() in f.read()
    except OSError:
        return False


def serve(listener: "socket.socket", response: bytes) -> None:  # noqa: F821 - imported in start
    """Answer every connection with `response`, reading the request head first so the
    client never sees a reset (bench only: no parsing, no keep-alive)."""
    while True:
        conn, _ = listener.accept()
        try:
            conn.settimeout(5)
            head = b""
            while b"\r\n\r\n" not in head:
                chunk = conn.recv(4096)
                if not chunk:
                    break
                head += chunk
            conn.sendall(response)
        except OSError:
            pass
        finally:
            conn.close()


def cmd_start() -> int:
    import socket

    if read_pid() is not None:
        return 0
    config = load_config()
    response = RESPONSES[503 if is_broken(config) else 200]
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind((config["host"], int(config["port"])))
    listener.listen(64)  # listening now: health connects queue until the child accepts
    pid = os.fork()
    if pid == 0:
        os.setsid()
        devnull = os.open(os.devnull, os.O_RDWR)
        for fd in (0, 1, 2):
            os.dup2(devnull, fd)  # let the caller's pipes close, or ssh/subprocess would wait
        signal.signal(signal.SIGTERM, lambda *_: os._exit(0))
        try:
            serve(listener, response)
        finally:
            os._exit(0)
    listener.close()
    with open(PID_FILE, "w") as f:
        f.write(f"{pid}\n")
    return 0


def cmd_stop() -> int:
    pid = read_pid()
    if pid is None:
        _remove_pid_file()
        return 0
    os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + 5
    while read_pid() is not None and time.monotonic() < deadline:
        time.sleep(0.005)
    if read_pid() is not None:
        return 1
    _remove_pid_file()
    return 0


def _remove_pid_file() -> None:
    try:
        os.unlink(PID_FILE)
    except FileNotFoundError:
        pass


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
