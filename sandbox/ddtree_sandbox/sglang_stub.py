"""A small sglang-shaped HTTP server for sandbox TESTS; it is not sglang and serves no model.

Copied into each sandbox host as ``/srv/service/sglang_stub.py`` and run by the host's python,
so it is stdlib only. Usage: ``python sglang_stub.py start|stop|status`` (``serve [FLAGS]`` is
the server process itself: what a systemd unit's ExecStart runs, with ``$SGLANG_ARGS`` from
its EnvironmentFile). Files beside it: ``stub.json`` (settings), ``server.pid``,
``server.log``.

Launch flags (``serve --speculative-algorithm X --speculative-ddtree-budget N --host H --port
P ...``) override stub.json's values of the same meaning; all of them are logged and echoed
by ``/server_info`` as ``launch_args``, so a test sees which flags a start got.

The server first imports the host's real (possibly patched) sglang modules, so a broken patch
really breaks it: the traceback goes to the log, it exits non-zero and never becomes healthy.
It then serves ``GET /health_generate`` (503 during ``startup_delay_s``, then 200),
``GET /server_info`` and ``POST /generate``, with numbers taken from ``stub.json``. Test knobs
in ``stub.json``: ``never_ready`` (health stays 503), ``fail_start`` (exit 1 at once),
``leftover_child`` (a child in a session of its own keeps the listening socket open after the
server is stopped: what a killed sglang leaves behind), ``generate_delay_s`` (each
``/generate`` takes that long) and ``metrics`` (``/metrics`` exports sglang's
``sglang:num_running_reqs`` gauge: the requests in ``/generate`` now, as
``--enable-metrics`` does), ``imports`` (``"patched"``: load only the installed
``ddtree_utils.py``, not sglang: for tests that restart many times). ``group`` (a
multi-node server, like sglang ``--nnodes``):
``{"role": "leader" | "worker", "rank": R, "nnodes": N, "leader": "http://ADDR:PORT"}``: a
worker serves no HTTP; it registers the sha256 of its installed ``ddtree_utils.py`` with
the leader (``POST /register``) and exits when the leader stops answering; the leader's
health stays 503 until every rank 1..N-1 registered the same sha256 as its own. It logs
sglang's "Load weight end" line after the imports and its "fired up" line when ready (the
start-up watchdog's marks).
``api_key`` (sglang's ``--api-key``): every route but ``/health*`` and ``/metrics`` then answers
401 ``{"error": "Unauthorized"}`` without ``Authorization: Bearer KEY``, and ``/server_info``
echoes the key, as sglang's (it returns its server args) does.

Exit codes: ``status`` 0 running, 3 stopped; ``start``/``stop`` 0 on success, 1 on failure.
"""

from __future__ import annotations

import hashlib
import hmac
import importlib
import importlib.util
import json
import math
import os
import signal
import subprocess
import sys
import threading
import time
import traceback
import urllib.error
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

SERVICE_DIR = Path(__file__).resolve().parent
CONFIG_FILE = SERVICE_DIR / "stub.json"
PID_FILE = SERVICE_DIR / "server.pid"
LOG_FILE = SERVICE_DIR / "server.log"
READY_LINE = "The server is fired up and ready to roll!"
REQUIRED_MODULES = ("sglang.srt.speculative.spec_info", "sglang.srt.server_args")
OPTIONAL_MODULES = ("sglang.srt.speculative.ddtree_utils",)
DEFAULTS = {
    "host": "127.0.0.1",
    "port": 30000,
    "speculative_algorithm": "DDTREE",
    "ddtree_budget": 64,
    "accept_length": 3.2,
    "startup_delay_s": 0.5,
    "never_ready": False,
    "fail_start": False,
    "leftover_child": False,
    "api_key": None,
    "generate_delay_s": 0.0,
    "metrics": False,
    "group": None,
    "imports": "all",
}
# The patched file whose sha256 the ranks of a group compare (the fast test patchsets' file),
# and the one file `imports = "patched"` loads.
PATCHED_FILE = "sglang/srt/speculative/ddtree_utils.py"
WORKER_GIVE_UP_S = 300.0  # a worker that never reached its leader exits after this long
WORKER_LOST_POLLS = 4  # leader polls (0.5 s apart) refused in a row: the leader died


def log(message: str) -> None:
    """Print one timestamped line to stdout (the server log when serving)."""
    print(f"[{time.strftime('%Y-%m-%d %H:%M:%S')}] {message}", flush=True)


FLAG_KEYS = {
    "--speculative-algorithm": ("speculative_algorithm", str),
    "--speculative-ddtree-budget": ("ddtree_budget", int),
    "--host": ("host", str),
    "--port": ("port", int),
}


def load_config(flags: list[str] | None = None) -> dict:
    """Return DEFAULTS overlaid with stub.json (missing file means defaults), then with the
    launch ``flags`` it knows (FLAG_KEYS); the flags themselves as ``launch_args``."""
    config = dict(DEFAULTS)
    if CONFIG_FILE.exists():
        config.update(json.loads(CONFIG_FILE.read_text()))
    flags = list(flags or [])
    for flag, value in zip(flags, flags[1:], strict=False):
        if flag in FLAG_KEYS:
            key, kind = FLAG_KEYS[flag]
            config[key] = kind(value)
    config["launch_args"] = flags
    return config


def read_pid() -> int | None:
    try:
        return int(PID_FILE.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None


def is_alive(pid: int) -> bool:
    """Return True if ``pid`` runs this stub and is not a zombie."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False
    state = stat[stat.rfind(")") + 2 :].split()[0]
    return state != "Z" and b"sglang_stub.py" in cmdline


def running_pid() -> int | None:
    pid = read_pid()
    return pid if pid is not None and is_alive(pid) else None


def cmd_start() -> int:
    """Spawn the detached server process, record its pid; fail if it dies at once."""
    if running_pid() is not None:
        print(f"already running, pid {running_pid()}")
        return 0
    with open(LOG_FILE, "ab") as log_file:
        proc = subprocess.Popen(
            [sys.executable, str(Path(__file__).resolve()), "serve"],
            stdin=subprocess.DEVNULL,
            stdout=log_file,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            cwd=str(SERVICE_DIR),
        )
    PID_FILE.write_text(f"{proc.pid}\n")
    try:
        code = proc.wait(timeout=0.5)
    except subprocess.TimeoutExpired:
        print(f"started, pid {proc.pid}")
        return 0
    PID_FILE.unlink(missing_ok=True)
    print(f"server exited at once with code {code}; see {LOG_FILE}", file=sys.stderr)
    return 1


def cmd_stop(timeout_s: float = 10.0) -> int:
    """SIGTERM the server, wait, SIGKILL after ``timeout_s``; 0 when it is not running."""
    pid = running_pid()
    if pid is None:
        PID_FILE.unlink(missing_ok=True)
        print("not running")
        return 0
    for signum, wait_s in ((signal.SIGTERM, timeout_s), (signal.SIGKILL, 3.0)):
        try:
            os.kill(pid, signum)
        except ProcessLookupError:
            break
        deadline = time.monotonic() + wait_s
        while time.monotonic() < deadline and is_alive(pid):
            time.sleep(0.05)
        if not is_alive(pid):
            break
    if is_alive(pid):
        print(f"pid {pid} did not stop", file=sys.stderr)
        return 1
    PID_FILE.unlink(missing_ok=True)
    print(f"stopped pid {pid}")
    return 0


def cmd_status() -> int:
    pid = running_pid()
    print(f"running, pid {pid}" if pid is not None else "stopped")
    return 0 if pid is not None else 3


def find_installed(rel: str) -> Path | None:
    """Where `rel` (a path under site-packages) is on sys.path, found without importing."""
    for entry in sys.path:
        candidate = Path(entry or ".") / rel
        if candidate.is_file():
            return candidate
    return None


def import_patched() -> str:
    """`imports = "patched"` (topology tests that restart many times): load only the
    installed PATCHED_FILE, by path (a broken patch still breaks the start; sglang's own
    package init, ~5 s of every start here, is skipped); the version from its dist-info."""
    path = find_installed(PATCHED_FILE)
    if path is not None:
        spec = importlib.util.spec_from_file_location("stub_patched_module", path)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = module  # its dataclasses look their module up there
        spec.loader.exec_module(module)
        log(f"loaded {path}")
    for entry in sys.path:
        found = sorted(Path(entry or ".").glob("sglang-*.dist-info"))
        if found:
            return found[-1].name.removeprefix("sglang-").removesuffix(".dist-info")
    return "unknown"


def import_sglang() -> str:
    """Import the sglang modules a DDTree patch touches; return sglang's version string."""
    for name in REQUIRED_MODULES:
        importlib.import_module(name)
    for name in OPTIONAL_MODULES:
        if importlib.util.find_spec(name) is not None:
            importlib.import_module(name)
            log(f"imported {name}")
    from sglang.version import __version__

    return __version__


class StubState:
    """What the handler answers with; set once at startup."""

    def __init__(self, config: dict, version: str) -> None:
        self.config = config
        self.version = version
        self.ready_at = time.monotonic() + float(config["startup_delay_s"])
        self.running = 0  # requests in /generate now (the metrics gauge)
        self.lock = threading.Lock()
        self.ranks: dict[int, str] = {}  # a group leader's registered workers: rank -> sha256
        self.own_sha = patched_sha256()

    def is_ready(self) -> bool:
        started = not self.config["never_ready"] and time.monotonic() >= self.ready_at
        return started and self.group_complete()

    def group_complete(self) -> bool:
        """A group leader: every worker rank registered this leader's sha256."""
        group = self.config["group"]
        if not group:
            return True
        wanted = set(range(1, int(group["nnodes"])))
        with self.lock:
            return set(self.ranks) == wanted and set(self.ranks.values()) <= {self.own_sha}

    def register(self, request: dict) -> tuple[int, dict]:
        """A worker's registration: 200, or 409 when its patch differs from the leader's."""
        rank, sha = int(request["rank"]), str(request["sha256"])
        with self.lock:
            self.ranks[rank] = sha
        if sha != self.own_sha:
            log(f"group: rank {rank} runs different code ({sha[:12]} != {self.own_sha[:12]})")
            return 409, {"error": "different code"}
        log(f"group: rank {rank} registered ({sha[:12]})")
        return 200, {"ok": True}

    def server_info(self) -> dict:
        return {
            "version": self.version,
            "speculative_algorithm": self.config["speculative_algorithm"],
            "speculative_ddtree_budget": self.config["ddtree_budget"],
            "internal_states": [{"avg_spec_accept_length": self.config["accept_length"]}],
            "api_key": self.config["api_key"],
            "launch_args": self.config["launch_args"],
            "stub": True,
        }

    def authorized(self, path: str, authorization: str | None) -> bool:
        """Whether sglang's API-key middleware lets this request through: /health* and
        /metrics always, anything else only with ``Bearer KEY`` when a key is set."""
        key = self.config["api_key"]
        if not key or path.startswith(("/health", "/metrics")):
            return True
        scheme, _, token = (authorization or "").partition(" ")
        return scheme.lower() == "bearer" and hmac.compare_digest(token, key)

    def generate(self, request: dict) -> dict:
        params = request.get("sampling_params") or {}
        completion_tokens = int(params.get("max_new_tokens", 16))
        accept_length = float(self.config["accept_length"])
        prompt = str(request.get("text", ""))
        return {
            "text": f" stub completion #{completion_tokens} for: {prompt[:40]}",
            "meta_info": {
                "prompt_tokens": len(prompt.split()),
                "completion_tokens": completion_tokens,
                "spec_verify_ct": math.ceil(completion_tokens / max(accept_length, 1e-6)),
                "spec_accept_length": accept_length,
            },
        }


def make_handler(state: StubState) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # http.server's naming
            if not state.authorized(self.path, self.headers.get("Authorization")):
                self.send_json(401, {"error": "Unauthorized"})
            elif self.path in ("/health", "/health_generate"):
                self.send_json(200 if state.is_ready() else 503, {"ready": state.is_ready()})
            elif self.path == "/metrics" and state.config["metrics"]:
                gauge = "# TYPE sglang:num_running_reqs gauge\n"
                self.send_text(200, f"{gauge}sglang:num_running_reqs {state.running}\n")
            elif self.path == "/metrics":
                self.send_text(200, "# stub: no metrics\n")
            elif self.path in ("/server_info", "/get_server_info"):
                self.send_json(200, state.server_info())
            else:
                self.send_json(404, {"error": f"no route {self.path}"})

        def do_POST(self) -> None:
            if not state.authorized(self.path, self.headers.get("Authorization")):
                self.send_json(401, {"error": "Unauthorized"})
                return
            if self.path == "/register" and state.config["group"]:
                length = int(self.headers.get("Content-Length") or 0)
                self.send_json(*state.register(json.loads(self.rfile.read(length) or b"{}")))
                return
            if self.path != "/generate":
                self.send_json(404, {"error": f"no route {self.path}"})
                return
            if not state.is_ready():
                self.send_json(503, {"error": "server not ready"})
                return
            length = int(self.headers.get("Content-Length") or 0)
            try:
                request = json.loads(self.rfile.read(length) or b"{}")
            except json.JSONDecodeError as exc:
                self.send_json(400, {"error": str(exc)})
                return
            with state.lock:
                state.running += 1
            try:
                time.sleep(float(state.config["generate_delay_s"]))
                self.send_json(200, state.generate(request))
            finally:
                with state.lock:
                    state.running -= 1

        def send_json(self, code: int, body: dict) -> None:
            payload = json.dumps(body).encode()
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

        def send_text(self, code: int, text: str) -> None:
            payload = text.encode()
            self.send_response(code)
            self.send_header("Content-Type", "text/plain")
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

        def log_message(self, format: str, *args: object) -> None:
            log(f"{self.address_string()} {format % args}")

    return Handler


def cmd_serve(flags: list[str] | None = None) -> int:
    """Import sglang, bind, announce readiness after the delay; run until SIGTERM."""
    config = load_config(flags)
    log(f"stub server starting, pid {os.getpid()}, config {json.dumps(config, sort_keys=True)}")
    if config["fail_start"]:
        log("fail_start is set in stub.json: exiting 1")
        return 1
    try:
        version = import_patched() if config["imports"] == "patched" else import_sglang()
    except BaseException:
        traceback.print_exc(file=sys.stdout)
        log("importing sglang failed: exiting 1")
        return 1
    where = sys.modules["sglang"].__file__ if "sglang" in sys.modules else "its dist-info"
    log(f"imported sglang {version} from {where}")
    log("Load weight end. (stub: no weights)")
    group = config["group"]
    if group and group["role"] == "worker":
        return run_worker(group)
    state = StubState(config, version)
    server = ThreadingHTTPServer((config["host"], int(config["port"])), make_handler(state))
    server.daemon_threads = True
    if config["leftover_child"]:
        child = subprocess.Popen(
            [sys.executable, "-c", "import time; time.sleep(3600)"],
            pass_fds=[server.socket.fileno()],
            start_new_session=True,
            stdin=subprocess.DEVNULL,
        )
        log(f"leftover_child: pid {child.pid} holds the listening socket")
    signal.signal(signal.SIGTERM, lambda *_: threading.Thread(target=server.shutdown).start())
    if not config["never_ready"]:
        delay_s = max(0.0, state.ready_at - time.monotonic())
        threading.Timer(delay_s, log, args=(READY_LINE,)).start()
    log(f"listening on http://{config['host']}:{config['port']}")
    server.serve_forever(poll_interval=0.1)
    server.server_close()
    log("stub server stopped")
    # Skip interpreter teardown: with torch and sglang loaded it adds about a second.
    sys.stdout.flush()
    os._exit(0)


def patched_sha256() -> str:
    """sha256 of the installed PATCHED_FILE ("absent" when there is none)."""
    path = find_installed(PATCHED_FILE)
    return hashlib.sha256(path.read_bytes()).hexdigest() if path else "absent"


def run_worker(group: dict) -> int:
    """A group worker: register with the leader until it answers, then exit once it is
    gone (sglang's non-zero ranks die with rank 0). Serves no HTTP."""
    body = json.dumps({"rank": group["rank"], "sha256": patched_sha256()}).encode()
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    signal.signal(signal.SIGTERM, lambda *_: os._exit(0))
    deadline = time.monotonic() + WORKER_GIVE_UP_S
    while True:  # register (the leader may start after this worker)
        try:
            request = urllib.request.Request(f"{group['leader']}/register", data=body)
            with opener.open(request, timeout=5):
                break
        except urllib.error.HTTPError as exc:
            log(f"group: the leader refused rank {group['rank']}: HTTP {exc.code}: exiting 1")
            os._exit(1)
        except OSError:
            if time.monotonic() > deadline:
                log("group: the leader never answered: exiting 1")
                os._exit(1)
            time.sleep(0.2)
    log(f"group: rank {group['rank']} registered with {group['leader']}")
    lost = 0
    while lost < WORKER_LOST_POLLS:
        time.sleep(0.5)
        try:
            with opener.open(f"{group['leader']}/health", timeout=5):
                lost = 0
        except urllib.error.HTTPError:
            lost = 0  # it answers (503 while other ranks register)
        except OSError:
            lost += 1
    log("group: the leader is gone: exiting 1")
    os._exit(1)


def main(argv: list[str]) -> int:
    if len(argv) >= 2 and argv[1] == "serve":
        return cmd_serve(argv[2:])
    commands = {"start": cmd_start, "stop": cmd_stop, "status": cmd_status}
    if len(argv) != 2 or argv[1] not in commands:
        print(f"usage: {argv[0]} {{start|stop|status}}", file=sys.stderr)
        return 2
    return commands[argv[1]]()


if __name__ == "__main__":
    sys.exit(main(sys.argv))
