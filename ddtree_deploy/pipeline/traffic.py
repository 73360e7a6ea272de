"""Traffic around a host's restart: take its servers out of their load balancer (the SGLang
router's worker API) and wait for their in-flight requests, run the inventory's hooks, and
put the servers back only once they passed every gate (or the rollback's health check).

This runs on the CONTROLLER: the router and the hooks are the operator's, not the host's.
HTTP goes through urllib: two one-shot POSTs and a /metrics GET per host do not justify a
client library on the controller's import path (prometheus_client reads the gauge).
"""

from __future__ import annotations

import os
import shlex
import subprocess
import time
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass, field

from ddtree_deploy.events import Stage
from ddtree_deploy.gate.metrics import sample_sum
from ddtree_deploy.inventory.service import DrainSpec
from ddtree_deploy.pipeline.context import HostRun

RUNNING_GAUGE = "sglang:num_running_reqs"
POLL_S = 0.25  # in-flight poll interval while draining
HTTP_TIMEOUT_S = 10.0


@dataclass
class Traffic:
    """One push's traffic handling on one host (what it took out, to put back)."""

    run: HostRun
    deploy_id: str
    removed: list[tuple[str, DrainSpec]] = field(default_factory=list)

    @property
    def drains(self) -> list[tuple[str, DrainSpec]]:
        """(service name, drain) of every service of the host that sits behind a router."""
        return [(name, s.drain) for s, name in self.run.host.named_services() if s.drain]

    def drain_stage(self) -> str | None:
        """The `drain` stage, when the host has a pre_restart hook or drain tables: why it
        failed ("drain failed: ..."), else None."""
        if not self.run.host.hooks.pre_restart and not self.drains:
            return None
        recorder = self.run.recorder
        recorder.start(Stage.DRAIN)
        why = self.before_restart()
        if why is None:
            recorder.ok(Stage.DRAIN)
            return None
        recorder.fail(Stage.DRAIN, why)
        return f"drain failed: {why}"

    def readmit_stage(self) -> str | None:
        """The `readmit` stage once every gate passed (the servers back in their routers,
        the post_verify hook): why it failed, else None."""
        if not self.removed and not self.run.host.hooks.post_verify:
            return None
        recorder = self.run.recorder
        recorder.start(Stage.READMIT)
        why = self.after_gates()
        if why is None:
            recorder.ok(Stage.READMIT)
        else:
            recorder.fail(Stage.READMIT, why)
        return why

    def before_restart(self) -> str | None:
        """The pre_restart hook, then each draining service removed from its router and
        its in-flight requests waited for; return why it failed (what was removed is
        added back), None when the restart may go on."""
        why = self._hook("pre_restart", Stage.DRAIN)
        if why is not None:
            return why
        for name, drain in self.drains:
            try:
                _router_call(drain.router, "remove_worker", drain.worker_url)
            except OSError as exc:
                self.put_back(Stage.DRAIN)
                return f"{name}: the router {drain.router} did not remove {drain.worker_url}: {exc}"
            self.removed.append((name, drain))
            left = self._wait_idle(name, drain)
            self.run.recorder.info(
                Stage.DRAIN, f"{name}: removed from {drain.router}; {left}", {"drained": name}
            )
        return None

    def after_gates(self) -> str | None:
        """The servers back in their routers, then the post_verify hook; why either failed."""
        return self.put_back(Stage.READMIT) or self._hook("post_verify", Stage.READMIT)

    def after_rollback(self, healthy: bool) -> str | None:
        """After a rollback: the removed servers back only when the old server came back
        healthy (else they stay out: needs attention), then the on_rollback hook."""
        why = self.put_back(Stage.ROLLBACK) if healthy else None
        if not healthy and self.removed:
            names = ", ".join(name for name, _ in self.removed)
            why = f"left out of the router (not healthy after the rollback): {names}"
        return why or self._hook("on_rollback", Stage.ROLLBACK)

    def put_back(self, stage: Stage) -> str | None:
        """`add_worker` for every server this push removed; why one failed, else None."""
        failed = []
        while self.removed:
            name, drain = self.removed.pop(0)
            try:
                _router_call(drain.router, "add_worker", drain.worker_url)
            except OSError as exc:
                failed.append(f"{name}: the router {drain.router} did not add it back: {exc}")
                continue
            self.run.recorder.info(stage, f"{name}: added back to {drain.router}", {"added": name})
        return "; ".join(failed) or None

    def _wait_idle(self, name: str, drain: DrainSpec) -> str:
        """Poll the server's running-requests gauge until 0 (at most timeout_s); say how
        it ended. Without the gauge (no --enable-metrics), wait grace_s instead."""
        url = drain.metrics_url or f"{drain.worker_url}/metrics"
        started = time.monotonic()
        while True:
            running = _running_requests(url)
            waited = time.monotonic() - started
            if running is None:
                time.sleep(drain.grace_s)
                return f"no {RUNNING_GAUGE} at {url}: waited grace_s = {drain.grace_s}s"
            if running <= 0:
                return f"0 requests running after {waited:.1f}s"
            if waited >= drain.timeout_s:
                return f"still {running:g} requests running after {drain.timeout_s}s: going on"
            time.sleep(POLL_S)

    def _hook(self, key: str, stage: Stage) -> str | None:
        """Run the host's hook `key` (if set) on the controller; why it failed, else None."""
        hooks = self.run.host.hooks
        command = getattr(hooks, key)
        if command is None:
            return None
        env = dict(
            os.environ,
            DDTREE_HOST=self.run.host.name,
            DDTREE_DEPLOY_ID=self.deploy_id,
            DDTREE_STAGE=key,
        )
        argv = shlex.split(command)
        try:
            done = subprocess.run(
                argv,
                env=env,
                capture_output=True,
                text=True,
                timeout=hooks.timeout_s,
                stdin=subprocess.DEVNULL,
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            return f"hook {key} ({argv[0]}) failed: {exc}"
        output = (done.stdout + done.stderr).strip().splitlines()
        if done.returncode != 0:
            last = output[-1][:300] if output else "no output"
            return f"hook {key} ({argv[0]}) exited {done.returncode}: {last}"
        self.run.recorder.info(stage, f"hook {key} ran", {"hook": key})
        return None


def _router_call(router: str, action: str, worker_url: str) -> None:
    """POST ROUTER/ACTION?url=WORKER (the SGLang router's add_worker / remove_worker);
    raises OSError (urllib's errors are OSErrors) unless it answers 2xx."""
    query = urllib.parse.urlencode({"url": worker_url})
    request = urllib.request.Request(f"{router}/{action}?{query}", data=b"", method="POST")
    with _OPENER.open(request, timeout=HTTP_TIMEOUT_S):
        return


def _running_requests(url: str) -> float | None:
    """The server's running requests (the gauge's sum), None when it exports none."""
    try:
        with _OPENER.open(url, timeout=HTTP_TIMEOUT_S) as response:
            text = response.read().decode("utf-8", "replace")
        return sample_sum(text, RUNNING_GAUGE, {})
    except (OSError, ValueError):
        return None


# The router and the servers are the operator's own network: never through a proxy.
_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))
