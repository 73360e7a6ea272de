"""Run the real ddtree-deploy CLI in this process and write each host's TransportStats.

Usage: ``python bench/ddtree_push.py STATS_JSON ARGS...`` runs ``ddtree-deploy ARGS...``
exactly as the console script would (and ends as it does, through ``cli.leave``), with one
hook: every transport is remembered as it is made (``Transport.__init__``, patched when
its module first loads).
On exit STATS_JSON gets
``{"exit_code": N, "hosts": {name: {connects, execs, bytes_sent, bytes_received}}}``.

With ``DDTREE_BENCH_PROFILE=FILE`` every thread (main, fleet workers, Paramiko's transport
threads) runs under its own cProfile profiler, timing thread CPU (not wall), and the merged
stats go to FILE (pstats format): `bench/profile_fleet.py` shows where the controller
spends its CPU.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, NoReturn

if TYPE_CHECKING:
    import cProfile

PROFILE_ENV = "DDTREE_BENCH_PROFILE"
# With DDTREE_BENCH_RECORD=FILE every host's framed agent answers, in order, go to FILE as
# {"frames": {host: [answer, ...]}}: what bench/standin_agent.py replays (timing runs only).
RECORD_ENV = "DDTREE_BENCH_RECORD"
TRANSPORT_BASE = "ddtree_deploy.transport.base"


class _PatchOnLoad:
    """A meta path finder that lets `name` load as usual, then calls `patch(module)`.

    The hook must not import the transport itself: the CLI loads it late on purpose (the
    connections it opens ahead overlap the imports that follow, cli/__init__.py), and a
    bench that loaded it first would time another start-up than the console script's.
    """

    def __init__(self, name: str, patch):
        self.name, self.patch = name, patch

    def find_spec(self, fullname, path, target=None):
        if fullname != self.name:
            return None
        sys.meta_path.remove(self)
        from importlib.machinery import PathFinder

        spec = PathFinder.find_spec(fullname, path)
        if spec is None or spec.loader is None:
            return spec
        load, patch = spec.loader.exec_module, self.patch

        def exec_module(module):
            load(module)
            patch(module)

        spec.loader.exec_module = exec_module  # type: ignore[method-assign]
        return spec


def _remember(base, opened: list, answers: dict | None = None) -> None:
    """The hook: every Transport records itself in `opened` (stats read after the run);
    with `answers`, each host's raw agent answers are appended to answers[host] too."""
    original = base.Transport.__init__

    def init(self, host):
        original(self, host)
        opened.append(self)
        if answers is not None:
            exec_agent, kept = self._exec_agent, answers.setdefault(host.name, [])

            def recording(payload):
                out, err, code = exec_agent(payload)
                kept.append(out)
                return out, err, code

            self._exec_agent = recording

    base.Transport.__init__ = init


def profile_every_thread() -> list[cProfile.Profile]:
    """Give each thread started from now on its own profiler; returns the list they join.

    Threads are hooked at ``Thread._bootstrap_inner`` (CPython's private start-up method):
    Paramiko's transport threads override ``run``, so patching ``run`` would miss them.
    """
    import cProfile
    import threading
    import time

    profiles: list[cProfile.Profile] = []
    lock = threading.Lock()
    original = threading.Thread._bootstrap_inner  # type: ignore[attr-defined]

    def profiled(self: threading.Thread) -> None:
        profile = cProfile.Profile(time.thread_time)  # CPU, not wall
        with lock:
            profiles.append(profile)
        profile.enable()
        try:
            original(self)
        finally:
            profile.disable()

    threading.Thread._bootstrap_inner = profiled  # type: ignore[attr-defined]
    return profiles


def main() -> NoReturn:
    """The console script's run plus the hook. Nothing is imported before the CLI but what
    the console script's own stub imports (os, sys): __main__.load_cli (called here too)
    turns the collector off for the CLI's imports, cli.main defers `invoke` (done below),
    and the CLI opens its first connections before it loads the pipeline (fleet/ahead.py);
    modules the bench loaded ahead of it would change both. tests/bench/test_push_entry.py
    holds the state to the console script's."""
    stats_path, cli_args = Path(sys.argv[1]), sys.argv[2:]
    profile_path = os.environ.get(PROFILE_ENV)
    profiles = profile_every_thread() if profile_path else []
    main_profile = None
    if profile_path:
        import cProfile
        import time

        main_profile = cProfile.Profile(time.thread_time)
        main_profile.enable()
    opened: list = []  # every Transport the command creates, in order
    record_path = os.environ.get(RECORD_ENV)
    answers: dict | None = {} if record_path else None
    sys.meta_path.insert(0, _PatchOnLoad(TRANSPORT_BASE, lambda m: _remember(m, opened, answers)))
    # What the console script does before a command (ddtree_deploy.__main__.main, then
    # cli.main): the CLI imported with the collector paused, what it made frozen, then the
    # `invoke` stand-in. A bench that skipped them timed a slower start than users get
    # (0.15 s more at launch, and GC passes over the frozen objects in a fleet run).
    from ddtree_deploy.__main__ import load_cli

    cli = load_cli()
    app, leave = cli.app, cli.leave
    from ddtree_deploy.lazy import defer_invoke

    defer_invoke()
    exit_code = 0
    try:
        app(args=cli_args, prog_name="ddtree-deploy")
    except SystemExit as exc:
        exit_code = exc.code if isinstance(exc.code, int) else 1
    import dataclasses
    import json

    hosts = {t.host.name: dataclasses.asdict(t.stats) for t in opened}
    stats_path.write_text(json.dumps({"exit_code": exit_code, "hosts": hosts}) + "\n")
    if record_path and answers is not None:
        Path(record_path).write_text(json.dumps({"frames": answers}) + "\n")
    if profile_path and main_profile is not None:
        import pstats

        main_profile.disable()
        merged = pstats.Stats(main_profile)
        for profile in profiles:
            try:
                merged.add(profile)
            except (TypeError, ValueError):  # a thread still running has no stats yet
                continue
        merged.dump_stats(profile_path)
    leave(exit_code)  # as the console script ends (cli.leave): no interpreter teardown


if __name__ == "__main__":
    main()
