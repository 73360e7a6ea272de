"""A small load balancer for TESTS, shaped like the SGLang router's worker API; it is not
the SGLang router.

``POST /add_worker?url=URL`` and ``POST /remove_worker?url=URL`` change the set of workers
(the legacy sgl-router API ddtree-deploy's `drain` table calls); ``GET /list_workers``
lists them; ``POST /generate`` goes to the next registered worker, round robin, and a
worker removed while requests run on it gets no new ones (those running finish). Every
change and every failed forward is logged with its wall-clock time, so a test can order
them against a push's events.
"""

from __future__ import annotations

import itertools
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

FORWARD_TIMEOUT_S = 30.0


@dataclass
class RouterLog:
    """What the router did: (time.time(), "add" | "remove" | "error", worker or detail)."""

    entries: list[tuple[float, str, str]] = field(default_factory=list)
    forwarded: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)

    def add(self, what: str, detail: str) -> None:
        with self.lock:
            self.entries.append((time.time(), what, detail))

    def of(self, what: str) -> list[tuple[float, str]]:
        with self.lock:
            return [(t, detail) for t, kind, detail in self.entries if kind == what]


class Router:
    """The router's state: its workers (in order) and its log."""

    def __init__(self, workers: list[str], refuse: tuple[str, ...] = ()) -> None:
        self.workers = list(workers)
        self.refuse = refuse  # actions answered 500 (a broken router, for fault tests)
        self.log = RouterLog()
        self._turn = itertools.count()
        self._lock = threading.Lock()
        self._opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))

    def change(self, action: str, url: str) -> bool:
        """add_worker / remove_worker; False for an unknown action."""
        with self._lock:
            if action == "add_worker" and url not in self.workers:
                self.workers.append(url)
            elif action == "remove_worker" and url in self.workers:
                self.workers.remove(url)
            elif action not in ("add_worker", "remove_worker"):
                return False
        self.log.add("add" if action == "add_worker" else "remove", url)
        return True

    def pick(self) -> str | None:
        with self._lock:
            if not self.workers:
                return None
            return self.workers[next(self._turn) % len(self.workers)]

    def forward(self, body: bytes) -> tuple[int, bytes]:
        """Send one /generate to the next worker; (status, body); 503 without workers."""
        worker = self.pick()
        if worker is None:
            self.log.add("error", "no worker registered")
            return 503, b'{"error": "no worker"}'
        request = urllib.request.Request(
            f"{worker}/generate", data=body, headers={"Content-Type": "application/json"}
        )
        try:
            with self._opener.open(request, timeout=FORWARD_TIMEOUT_S) as response:
                answer = response.read()
            with self.log.lock:
                self.log.forwarded += 1
            return 200, answer
        except (OSError, ValueError) as exc:
            self.log.add("error", f"{worker}: {exc}")
            return 502, b'{"error": "worker failed"}'


def serve_router(router: Router, address: str, port: int) -> ThreadingHTTPServer:
    """Start the router's HTTP server in a daemon thread; return it (shutdown() stops it)."""

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # http.server's naming
            if self.path == "/list_workers":
                self._answer(200, ("\n".join(router.workers) + "\n").encode())
            else:
                self._answer(404, b"no route\n")

        def do_POST(self) -> None:
            parsed = urllib.parse.urlsplit(self.path)
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            if parsed.path == "/generate":
                self._answer(*router.forward(body))
                return
            url = urllib.parse.parse_qs(parsed.query).get("url", [""])[0]
            if parsed.path.lstrip("/") in router.refuse:
                self._answer(500, b"injected fault: the router refuses\n")
            elif url and router.change(parsed.path.lstrip("/"), url):
                self._answer(200, b"ok\n")
            else:
                self._answer(400, b"bad worker change\n")

        def _answer(self, code: int, payload: bytes) -> None:
            self.send_response(code)
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

        def log_message(self, format: str, *args: object) -> None:
            return  # the RouterLog keeps what tests read

    server = ThreadingHTTPServer((address, port), Handler)
    server.daemon_threads = True
    threading.Thread(
        target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
    ).start()
    return server
