"""A threaded TCP proxy that delays every byte by half a round trip in each direction.

This kernel has no ``tc netem``, so the benchmarks put one of these in front of each sandbox
host's sshd: a client that connects to the proxy sees ``rtt_s`` more round-trip time and no
bandwidth limit. Each direction has a reader thread (stamps each chunk with when it may be
delivered) and a writer thread (sleeps until then, sends); order is kept, EOF is passed on.

Usage as a program: ``python bench/latency_proxy.py --rtt-ms 25 LISTEN_PORT:HOST:PORT ...``
"""

from __future__ import annotations

import argparse
import queue
import socket
import statistics
import threading
import time
from dataclasses import dataclass, field

CHUNK_BYTES = 65536


def _set_nodelay(sock: socket.socket) -> None:
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)


def _pump(src: socket.socket, dst: socket.socket, one_way_s: float) -> list[threading.Thread]:
    """Start the reader and writer threads that carry src -> dst with a fixed delay."""
    chunks: queue.Queue[tuple[float, bytes]] = queue.Queue()

    def read() -> None:
        while True:
            try:
                data = src.recv(CHUNK_BYTES)
            except OSError:
                data = b""
            chunks.put((time.monotonic() + one_way_s, data))
            if not data:
                return

    def write() -> None:
        while True:
            due_s, data = chunks.get()
            wait_s = due_s - time.monotonic()
            if wait_s > 0:
                time.sleep(wait_s)
            try:
                if not data:
                    dst.shutdown(socket.SHUT_WR)
                    return
                dst.sendall(data)
            except OSError:
                return

    threads = [threading.Thread(target=fn, daemon=True) for fn in (read, write)]
    for thread in threads:
        thread.start()
    return threads


@dataclass
class DelayProxy:
    """Listens on ``listen_host``:``port`` (0 picks one) and forwards to ``target``."""

    target: tuple[str, int]
    rtt_s: float
    listen_host: str = "127.0.0.1"
    port: int = 0
    connections: int = 0
    _server: socket.socket | None = field(default=None, repr=False)

    def start(self) -> DelayProxy:
        """Bind, start accepting in a daemon thread; returns self with ``port`` set."""
        server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        server.bind((self.listen_host, self.port))
        server.listen(128)
        self.port = server.getsockname()[1]
        self._server = server
        threading.Thread(target=self._accept, daemon=True).start()
        return self

    def _accept(self) -> None:
        assert self._server is not None
        while True:
            try:
                client, _ = self._server.accept()
            except OSError:
                return
            self.connections += 1
            threading.Thread(target=self._serve, args=(client,), daemon=True).start()

    def _serve(self, client: socket.socket) -> None:
        time.sleep(self.rtt_s)  # the TCP handshake a real link would cost (SYN, SYN-ACK)
        try:
            upstream = socket.create_connection(self.target, timeout=10)
        except OSError:
            client.close()
            return
        upstream.settimeout(None)
        for sock in (client, upstream):
            _set_nodelay(sock)
        one_way_s = self.rtt_s / 2
        threads = _pump(client, upstream, one_way_s) + _pump(upstream, client, one_way_s)
        for thread in threads:
            thread.join()
        client.close()
        upstream.close()

    def stop(self) -> None:
        """Stop accepting; open connections end when either side closes."""
        if self._server is not None:
            self._server.close()
            self._server = None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rtt-ms", type=float, default=25.0)
    parser.add_argument("routes", nargs="+", metavar="LISTEN_PORT:HOST:PORT")
    args = parser.parse_args()
    for route in args.routes:
        listen_port, host, port = route.split(":")
        proxy = DelayProxy((host, int(port)), args.rtt_ms / 1000, port=int(listen_port)).start()
        print(f"127.0.0.1:{proxy.port} -> {host}:{port} (+{args.rtt_ms:g} ms RTT)", flush=True)
    threading.Event().wait()


def measure_rtt_s(rtt_s: float, tries: int = 5) -> tuple[float, float]:
    """(TCP connect, median ping-pong) through a DelayProxy in front of a local echo server:
    proves the proxy adds what it is told to."""
    server = socket.create_server(("127.0.0.1", 0))

    def echo() -> None:
        conn, _ = server.accept()
        with conn:
            while data := conn.recv(64):
                conn.sendall(data)

    threading.Thread(target=echo, daemon=True).start()
    proxy = DelayProxy(server.getsockname(), rtt_s).start()
    samples = []
    started = time.monotonic()
    with socket.create_connection(("127.0.0.1", proxy.port), timeout=5) as sock:
        sock.sendall(b"x")
        sock.recv(64)
        connect_s = time.monotonic() - started
        for _ in range(tries):
            started = time.monotonic()
            sock.sendall(b"x")
            sock.recv(64)
            samples.append(time.monotonic() - started)
    proxy.stop()
    server.close()
    return connect_s, statistics.median(samples)


if __name__ == "__main__":
    main()
