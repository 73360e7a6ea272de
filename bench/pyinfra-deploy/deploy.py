"""Scenario A for pyinfra: the same work ddtree-deploy does for ddtree 1.0.0, one op per step.

Run by bench/pyinfra_peer.py as ``pyinfra INVENTORY bench/pyinfra-deploy/deploy.py -y --no-wait``
from pyinfra's own venv; the plan (files, paths, service commands) comes from the JSON file
named by BENCH_PYINFRA_PLAN, the health URL from each host's data. Per host: make the backup
dir, back up the files sglang already has (`cp -p`), upload the results (`files.put`: a
sha1 fact first, then SFTP), `py_compile` them, stop and start the service, wait for health.
"""

import json
import os
import shlex

from pyinfra import host
from pyinfra.operations import files, server

with open(os.environ["BENCH_PYINFRA_PLAN"]) as fh:
    plan = json.load(fh)
site, backup = plan["site"], plan["backup_dir"]

files.directory(name="Make the backup dir", path=backup, mode="700")
server.shell(
    name="Back up the originals",
    commands=[
        f"cp -p {shlex.quote(site + '/' + f['path'])} "
        f"{shlex.quote(backup + '/' + f['path'].replace('/', '__'))}"
        for f in plan["files"]
        if f["existed"]
    ],
)
for item in plan["files"]:
    files.put(name=f"Upload {item['path']}", src=item["src"], dest=f"{site}/{item['path']}",
              mode="644")  # fmt: skip
server.shell(
    name="Byte-compile the installed files",
    commands=[
        f"{plan['python']} -m py_compile "
        + " ".join(shlex.quote(f"{site}/{f['path']}") for f in plan["files"])
    ],
)
server.shell(name="Stop the service", commands=[plan["service_stop"]])
server.shell(name="Start the service", commands=[plan["service_start"]])
server.shell(
    name="Wait for health",
    commands=[
        "tries=0; until curl -fsS -o /dev/null "
        f"{shlex.quote(host.data.health_url)}; do tries=$((tries + 1)); "
        "[ $tries -lt 600 ] || exit 9; sleep 0.1; done"
    ],
)
