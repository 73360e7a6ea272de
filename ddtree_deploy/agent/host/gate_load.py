"""The gate's sustained load: `concurrency` workers send the prompts round-robin while a
thread polls the server's health URL; returns LoadStats.

The load ends when both plans are met (at least load_requests sent, at least bake_s
elapsed), after 2 * concurrency consecutive errors (a dead or hung server), or at a hard
deadline. The op always returns: every request has a socket timeout, the workers are joined
for at most the deadline plus one request timeout, the health thread for two probe timeouts.
"""

import math
import threading
import time

from . import gate_http
from .wire_results import LoadStats

HEALTH_TIMEOUT_S = 20.0  # per health probe: sglang's own /health_generate window
JOIN_SLACK_S = 1.0


def deadline_s(args):
    """Return the load's hard limit in seconds: the bake plus one request timeout per
    request each worker would send, and one more for the request in flight."""
    rounds = math.ceil(args.load_requests / args.concurrency)
    return args.bake_s + args.request_timeout_s * (rounds + 1)


class _Load:
    """What the workers share: the plan, the counts so far, and why the load stopped."""

    def __init__(self, args):
        self.lock = threading.Lock()
        self.plan_requests, self.bake_s = args.load_requests, args.bake_s
        self.max_streak = 2 * args.concurrency
        self.started = time.monotonic()
        self.deadline = self.started + deadline_s(args)
        self.sent = self.tokens = self.errors = self.streak = 0
        self.first_error = self.streak_first = self.stopped = None
        self.latencies_s = []

    def take(self):
        """Return the number of the next request to send, or None when the load is over."""
        with self.lock:
            now = time.monotonic()
            if self.stopped is not None:
                return None
            if self.sent >= self.plan_requests and now - self.started >= self.bake_s:
                return None
            if now >= self.deadline:
                self.stopped = "deadline: %.1fs passed with %d of %d requests sent" % (
                    now - self.started,
                    self.sent,
                    self.plan_requests,
                )
                return None
            self.sent += 1
            return self.sent - 1

    def record(self, answer):
        """Count one answer; stop the load at max_streak consecutive errors."""
        with self.lock:
            self.latencies_s.append(round(answer.latency_s, 6))
            if answer.error is None:
                self.tokens += answer.tokens
                self.streak, self.streak_first = 0, None
                return
            self.errors += 1
            self.first_error = self.first_error or answer.error
            self.streak_first = self.streak_first or answer.error
            self.streak += 1
            if self.streak >= self.max_streak and self.stopped is None:
                self.stopped = "%d consecutive errors: %s" % (self.streak, self.streak_first)

    def work(self, send, prompts):
        """A worker: send the next prompt (round-robin) until the load is over."""
        while True:
            number = self.take()
            if number is None:
                return
            try:
                answer = send(prompts[number % len(prompts)])
            except Exception as exc:  # noqa: BLE001 - a bug here must not end the load silently
                answer = gate_http.Answer(None, 0, 0, 0.0, "%s: %s" % (type(exc).__name__, exc))
            self.record(answer)


class _Health:
    """The health polls made during the load: how many, how many failed, the first why."""

    def __init__(self, opener, url):
        self.opener, self.url = opener, url
        self.polls = self.failures = 0
        self.first_failure = None

    def probe(self):
        """GET the health URL once; a failure is anything but HTTP 200 in time."""
        _, error = gate_http.get_text(self.opener, self.url, HEALTH_TIMEOUT_S, 0)
        self.polls += 1
        if error is not None:
            self.failures += 1
            self.first_failure = self.first_failure or error

    def poll(self, stop, every_s):
        """Probe every `every_s` seconds until `stop` is set, then once more (the end)."""
        while True:
            stopping = stop.wait(every_s)
            self.probe()
            if stopping:
                return


def run_load(send, prompts, args, opener):
    """Run the load of `args` (GateArgs) with send(prompt) -> gate_http.Answer; return
    LoadStats. Health polls only when args.health_url is set."""
    load = _Load(args)
    workers = [
        threading.Thread(target=load.work, args=(send, prompts), daemon=True)
        for _ in range(args.concurrency)
    ]
    health = _Health(opener, args.health_url) if args.health_url else None
    stop = threading.Event()
    poller = None
    if health is not None:
        poller = threading.Thread(target=health.poll, args=(stop, args.health_every_s))
        poller.daemon = True
        poller.start()
    for worker in workers:
        worker.start()
    give_up = load.deadline + args.request_timeout_s + JOIN_SLACK_S
    for worker in workers:
        worker.join(max(0.0, give_up - time.monotonic()))
    wall_s = time.monotonic() - load.started
    stop.set()
    if poller is not None:
        poller.join(2 * HEALTH_TIMEOUT_S + JOIN_SLACK_S)
    with load.lock:
        running = sum(1 for worker in workers if worker.is_alive())
        if running and load.stopped is None:
            load.stopped = "deadline: %d requests still unanswered" % running
        return LoadStats(
            requests=len(load.latencies_s),
            errors=load.errors,
            first_error=load.first_error,
            tokens=load.tokens,
            wall_s=round(wall_s, 6),
            latencies_s=list(load.latencies_s),
            health_polls=health.polls if health else 0,
            health_failures=health.failures if health else 0,
            first_health_failure=health.first_failure if health else None,
            stopped_early=load.stopped,
        )
