"""Run the real ddtree-deploy CLI in this process and write each host's TransportStats.

Usage: ``python bench/ddtree_push.py STATS_JSON ARGS...`` runs ``ddtree-deploy ARGS...``
exactly as the console script would, with one hook: the fleet's ``open_transport`` is
wrapped so every transport it opens is remembered. On exit STATS_JSON gets
``{"exit_code": N, "hosts": {name: {connects, execs, bytes_sent, bytes_received}}}``.
"""

from __future__ import annotations

import dataclasses
import json
import sys
from pathlib import Path

from ddtree_deploy.fleet import run as fleet_run
from ddtree_deploy.transport import Transport


def main() -> int:
    stats_path, cli_args = Path(sys.argv[1]), sys.argv[2:]
    opened: list[Transport] = []
    original = fleet_run.open_transport

    def remembering_open(host):  # the hook: same transport, remembered for its stats
        transport = original(host)
        opened.append(transport)
        return transport

    fleet_run.open_transport = remembering_open
    from ddtree_deploy.cli import app

    exit_code = 0
    try:
        app(args=cli_args, prog_name="ddtree-deploy")
    except SystemExit as exc:
        exit_code = exc.code if isinstance(exc.code, int) else 1
    hosts = {t.host.name: dataclasses.asdict(t.stats) for t in opened}
    stats_path.write_text(json.dumps({"exit_code": exit_code, "hosts": hosts}) + "\n")
    return exit_code


if __name__ == "__main__":
    sys.exit(main())
