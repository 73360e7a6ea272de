"""The "How it was measured" section of docs/benchmarks.md (bench/report.py appends it)."""

METHOD = """\
## How it was measured

- **Hosts**: `ddtree_sandbox` hosts: real OpenSSH servers (root, own mount namespace,
  real sglang 0.5.13.post1 in `/srv/venv`), all on this one machine. Hosts are reset to the
  pristine sglang files (and bytecode removed) before every timed run, so every run backs up,
  uploads, verifies, compiles and restarts for real. Each run is a fresh process of the tool,
  from bytecode compiled once beforehand (as `pip install` leaves it; this machine sets
  PYTHONDONTWRITEBYTECODE). A python start on a host costs ~0.1 s of CPU (the venv's `site`
  plus the sandbox's inert cpu-adapt `.pth`, ~5 ms since issue 19 item 0, ~65 ms before):
  every tool pays it per process it starts there (ours: the agent and each service command).
- **Latency**: `bench/latency_proxy.py`, a threaded TCP proxy in front of each host's sshd,
  delays every chunk by RTT/2 in each direction (no bandwidth limit; this kernel has no
  `tc netem`). Every tool connects to `127.0.0.1:PROXYPORT`; `known_hosts` names
  `[127.0.0.1]:PROXYPORT` with each host's real key, so host keys stay strictly checked.
- **Service**: `bench/instant_service.py` (kind `command`): `start` binds the port before it
  returns, so the first health poll answers. Each action imports only what it uses (`stop`
  and `status` cost a bare python start on a host, ~35 ms; since 2026-12-02, before which
  each also imported `http.server`, ~100 ms), and the server answers over a bare socket.
  Every tool runs the same commands (ours adds `status`). The sandbox's sglang stub is not
  used: it imports sglang at start (≈4–5 s of CPU) and would drown the orchestration being
  compared.
- **Same work for every tool** (scenario A, 4 hosts): back up the originals, upload the three
  files, verify hashes, `py_compile`, stop+start the service, wait for health.
  - ddtree-deploy: `push --all --yes --json` with a variant of ddtree 1.0.0 whose smoke
    `suites = []` (install verifies sha256 against the lock, compile runs `py_compile`);
    a second row uses `suites = ["integrity", "compile"]`.
  - Ansible (`bench/ansible/deploy.yml`): ansible-core from PyPI, `pipelining = True`,
    `gathering = explicit` (no facts), `interpreter_python` pinned, `forks = 16`,
    `ControlMaster=auto`, `ControlPersist=60s`, publickey only, no GSSAPI, no compression.
    Tasks: `file` (backup dir), `copy remote_src` loop (back up the two files sglang has),
    `copy` loop of the pre-materialised results with `checksum:` (sha1 verified after the
    transfer), `command: python -m py_compile`, `command` stop, `command` start, `uri` with
    `until` for health. *Cold*: a fresh ControlPath dir per run and the masters closed after
    it (one connect per host per run, as for ddtree-deploy). *Warm*: the masters of the
    previous run are reused (what a second playbook within 60 s gets).
  - Fabric (`bench/fabric_deploy.py`): a thread per host; one `run` per step and per file
    (`cp` backups, `sha256sum` checks), one SFTP `put` per file, a `curl` health loop.
  - The floor (`bench/floor.py`): per host ONE plain OpenSSH `ssh` (same key, proxy and
    strict known_hosts as every tool) running `sh -s` with the whole job on stdin: a
    `mkdir` lock, `cp -p` backups, each file written from base64, `sha256sum -c`,
    `py_compile`, the service's stop/start/status (the three commands a push runs), a
    `curl` health loop, a journal line; every host at once. `ssh true`: the same `ssh`
    with an empty command (connect, auth, one exec). What ours does beyond the floor is its
    start-up, the checks a deploy needs (drift, lock owner, rollback state) and the report.
  - pyinfra (`bench/pyinfra-deploy/deploy.py`): pyinfra 3.10.0 (bench/requirements-pyinfra.txt) in
    its own venv (it needs paramiko<5), `pyinfra INVENTORY deploy.py -y --no-wait`, cold (a
    fresh process; pyinfra keeps no connection between runs). Ops: `files.directory`, a
    `server.shell` `cp -p` of the files sglang has, `files.put` per file (sha1 fact, then
    SFTP), `server.shell` py_compile, stop, start, a `curl` health loop. Host keys checked
    against the same known_hosts (`ssh_strict_host_key_checking=yes`).
- **Scenario B-ctl, the controller alone**: the lowest core runs the tool, the others
  everything host-side (`taskset`; the bench process's proxy threads and every sandbox sshd
  are re-pinned, and what they start inherits it). *Stand-in* (timing only): one real push
  on a real host is recorded answer by answer (`bench/ddtree_push.py`,
  `DDTREE_BENCH_RECORD`), then 1–1,000 inventory hosts, each a port of a real OpenSSH sshd
  (16 ports per sshd) whose ForceCommand replays those answers
  (`bench/standin_agent.py`): the controller's SSH, host-key, request and parsing work is
  all real, the hosts do nothing. *Pinned*: the same pinning on real sandbox hosts, for
  ours, Ansible (cold) and pyinfra. Controller CPU per host: the tool's RUSAGE_CHILDREN
  (for Ansible without its ControlPersist masters, which leave the process tree).
- **Interleaving**: every comparison takes each contender once per run, back to back
  (ours, Ansible cold, Ansible warm, …; 1, 4, 16, 64 hosts; floor, suite), so a change of
  load hits both; ratios are per run (paired) and their median with min–max is reported.
  In scenario A, at each RTT, Ansible (warm masters up) and ddtree-deploy each run once
  untimed first, so no timed run pays the hosts' cold caches.
  Each run records the 1-minute load average (`os.getloadavg`) when it started and the
  tool's CPU seconds (`RUSAGE_CHILDREN` delta around its process: the controller; for
  Ansible its ssh clients too). Hosts' own CPU (scaling) is the sshd process trees' CPU.
- **Round trips** come from `TransportStats` (connects, execs, bytes per host) read through a
  hook in `bench/ddtree_push.py` that records every `Transport` as it is made (patched when
  its module first loads, so the CLI's import order is the console script's); the
  transport is unchanged.
"""
