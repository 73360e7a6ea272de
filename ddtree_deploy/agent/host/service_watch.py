"""What the agent watches around a server start (stdlib only).

Before a start: what the stopped instance left behind -- a process still listening on the
service's health port (on its address or on every address), and orphaned ``sglang::``
processes of this user (sglang names its scheduler and detokenizer so; their server died and
left them to init, still holding GPU memory). A start beside them fails with "address in
use" or CUDA out of memory, and so would the rollback's.

While waiting for health: the lines the new instance appends to its log, against fail
patterns (end the wait at once) and progress patterns (reported with the time they came).
"""

import os
import re
import shutil
import signal
import socket
import subprocess
import time
import urllib.parse

MAX_READ = 1 << 20  # bytes of new log read per poll; the rest is read at the next one
LINE_CHARS = 300  # the end of a matched line that is reported
TERM_WAIT_S = 10.0  # after SIGTERM, before SIGKILL
ORPHAN_TITLE = "sglang::"  # setproctitle prefix of sglang's subprocesses
_LISTEN = "0A"  # TCP state in /proc/net/tcp*


class LogWatch:
    """The lines a log file gains after `offset` (or that `source()` returns: a journal
    reader's new lines), matched one whole line at a time.

    A log that shrank (rotated or truncated by the start) is read again from its start.
    `progress` collects {"after_s", "pattern", "line"} in the order the lines came.
    """

    def __init__(
        self, path, offset, fail_patterns, progress_patterns, started, key=None, source=None
    ):
        self.path, self.offset, self.started, self.key = path, offset, started, key
        self.source = source
        self.fail = [(p, re.compile(p)) for p in fail_patterns or ()]
        self.marks = [(p, re.compile(p)) for p in progress_patterns or ()]
        self.progress = []
        self._partial = b""

    def poll(self):
        """Read what was appended; return (pattern, line) of the first line matching a
        fail pattern, else None. Lines still being written wait for their newline."""
        if not (self.path or self.source) or not (self.fail or self.marks):
            return None
        chunk = self.source() if self.source else self._read_file()
        if chunk is None:
            return None
        lines = (self._partial + chunk).split(b"\n")
        self._partial = lines.pop()
        after_s = round(time.monotonic() - self.started, 1)
        for raw in lines:
            line = self._shown(raw)
            for pattern, compiled in self.fail:
                if compiled.search(line):
                    return pattern, line
            for pattern, compiled in self.marks:
                if compiled.search(line):
                    self.progress.append({"after_s": after_s, "pattern": pattern, "line": line})
                    break
        return None

    def _read_file(self):
        """The bytes the log file gained (None when it cannot be read)."""
        try:
            with open(self.path, "rb") as fh:
                if os.fstat(fh.fileno()).st_size < self.offset:
                    self.offset, self._partial = 0, b""
                fh.seek(self.offset)
                chunk = fh.read(MAX_READ)
        except OSError:
            return None
        self.offset += len(chunk)
        return chunk

    def _shown(self, raw):
        """The line as reported: decoded, its end only, the server's API key redacted."""
        line = raw.decode("utf-8", "replace").rstrip("\r")[-LINE_CHARS:]
        return line.replace(self.key, "***") if self.key else line


def log_size(path):
    """The log file's size now (0 when there is none yet)."""
    try:
        return os.path.getsize(path) if path else 0
    except OSError:
        return 0


def find_leftovers(health_url):
    """Return [{"pid", "cmdline", "why"}] of processes a new start would collide with:
    listeners on the health URL's port (its address or a wildcard), orphaned sglang::
    processes of this user. The agent's own process is never listed."""
    found = {}
    for pid in _port_holders(health_url):
        found[pid] = "listens on %s" % _netloc(health_url)
    for pid in _orphans():
        found.setdefault(pid, "orphaned %s process (its server is gone)" % ORPHAN_TITLE)
    found.pop(os.getpid(), None)
    return [
        {"pid": pid, "cmdline": _cmdline(pid), "why": why} for pid, why in sorted(found.items())
    ]


def gpu_apps():
    """Return (note, [{"pid", "used_mib"}]) from nvidia-smi's compute apps; the note says
    when there is no nvidia-smi (the GPU check was skipped)."""
    if shutil.which("nvidia-smi") is None:
        return "GPU check skipped: no nvidia-smi on the host", []
    argv = ["nvidia-smi", "--query-compute-apps=pid,used_memory", "--format=csv,noheader,nounits"]
    try:
        out = subprocess.run(argv, capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.TimeoutExpired) as exc:
        return "GPU check failed: %s" % exc, []
    apps = []
    for line in out.splitlines():
        fields = [f.strip() for f in line.split(",")]
        if len(fields) == 2 and fields[0].isdigit():
            used = int(fields[1]) if fields[1].isdigit() else None
            apps.append({"pid": int(fields[0]), "used_mib": used})
    return "nvidia-smi: %d compute apps" % len(apps), apps


def end_processes(pids, wait_s=TERM_WAIT_S):
    """SIGTERM `pids`, wait up to `wait_s`, SIGKILL the rest; return the pids still alive."""
    for signum, wait in ((signal.SIGTERM, wait_s), (signal.SIGKILL, 3.0)):
        alive = [pid for pid in pids if _alive(pid)]
        for pid in alive:
            try:
                os.kill(pid, signum)
            except OSError:
                pass
        deadline = time.monotonic() + wait
        while alive and time.monotonic() < deadline:
            time.sleep(0.05)
            alive = [pid for pid in alive if _alive(pid)]
        if not alive:
            return []
    return [pid for pid in pids if _alive(pid)]


def _alive(pid):
    """True while `pid` exists and is not a zombie."""
    try:
        with open("/proc/%d/stat" % pid) as fh:
            return fh.read().rpartition(")")[2].split()[0] != "Z"
    except OSError:
        return False


def _netloc(url):
    parts = urllib.parse.urlsplit(url)
    return "%s:%s" % (parts.hostname, parts.port or (443 if parts.scheme == "https" else 80))


def _port_holders(url):
    """Pids holding a listening socket on the URL's port at its address or a wildcard."""
    parts = urllib.parse.urlsplit(url)
    port = parts.port or (443 if parts.scheme == "https" else 80)
    try:
        infos = socket.getaddrinfo(parts.hostname, port, proto=socket.IPPROTO_TCP)
        wanted = {info[4][0] for info in infos}
    except (OSError, UnicodeError):
        wanted = set()
    wanted |= {"0.0.0.0", "::"}
    inodes = set()
    for table, family in (("/proc/net/tcp", socket.AF_INET), ("/proc/net/tcp6", socket.AF_INET6)):
        try:
            with open(table) as fh:
                rows = fh.read().splitlines()[1:]
        except OSError:
            continue
        for row in rows:
            fields = row.split()
            if len(fields) < 10 or fields[3] != _LISTEN:
                continue
            address, _, hex_port = fields[1].partition(":")
            if int(hex_port, 16) == port and _address(address, family) in wanted:
                inodes.add(fields[9])
    return _pids_of_sockets(inodes) if inodes else []


def _address(hex_address, family):
    """An address of /proc/net/tcp* (host-order 32-bit words in hex) as text."""
    raw = bytes.fromhex(hex_address)
    words = b"".join(raw[i : i + 4][::-1] for i in range(0, len(raw), 4))
    text = socket.inet_ntop(family, words)
    return text[7:] if text.startswith("::ffff:") and "." in text else text


def _pids_of_sockets(inodes):
    """Pids with an open fd on one of the socket `inodes`."""
    wanted = {"socket:[%s]" % inode for inode in inodes}
    pids = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            fds = os.listdir("/proc/%s/fd" % name)
        except OSError:
            continue
        for fd in fds:
            try:
                if os.readlink("/proc/%s/fd/%s" % (name, fd)) in wanted:
                    pids.append(int(name))
                    break
            except OSError:
                continue
    return pids


def _orphans():
    """Pids of this user's processes titled sglang::... whose parent is no python process.

    sglang's scheduler and detokenizer are started by the server's python (or by its
    sglang::data_parallel_controller, a python too). When that died, the kernel handed them
    to init or a subreaper (a container's init, systemd): not a python interpreter.
    """
    uid, pids, title = os.getuid(), [], ORPHAN_TITLE.encode()
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            # The title first: one read rules out almost every process (a GPU host runs
            # hundreds), before the owner and parent are looked up.
            with open("/proc/%s/cmdline" % name, "rb") as fh:
                if fh.read(len(title)) != title:
                    continue
            if os.stat("/proc/" + name).st_uid != uid:
                continue
            with open("/proc/%s/stat" % name) as fh:
                ppid = int(fh.read().rpartition(")")[2].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        pid = int(name)
        if not _is_python(ppid):
            pids.append(pid)
    return pids


def _is_python(pid):
    """True when `pid` runs a python interpreter (its executable's name starts with python;
    a process that cannot be read counts as one: never end what we cannot see)."""
    if pid <= 1:
        return False
    try:
        return os.path.basename(os.readlink("/proc/%d/exe" % pid)).startswith("python")
    except OSError:
        return os.path.exists("/proc/%d" % pid)


def _cmdline(pid):
    """The process's command line (first 300 characters), "" when it is gone; the value
    of any --api-key / --admin-api-key flag is shown as ***."""
    try:
        with open("/proc/%d/cmdline" % pid, "rb") as fh:
            text = fh.read().replace(b"\0", b" ").decode("utf-8", "replace").strip()
    except OSError:
        return ""
    return _KEY_FLAG.sub(r"\1***", text)[:300]


_KEY_FLAG = re.compile(r"(--(?:admin-)?api-key(?:=|\s+))\S+")
