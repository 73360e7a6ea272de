#!/usr/bin/python3
"""TEST FIXTURE: a `docker` stand-in for sandbox hosts. It is NOT Docker and has no daemon.

Installed (by containers.py) as ``docker`` inside one sandbox host's mount namespace, it gives
ddtree-deploy's container support real processes to work on: a "container" is a process tree
in its own mount + pid (+ network) namespaces whose ``/srv`` is an overlay, the image's
directory as the read-only lower dir and a per-container upper dir as its writable layer.
What ddtree-deploy relies on is real here: ``exec`` enters those namespaces (a file written
there lands in the upper dir only), ``restart`` kills everything in the container (the agent
exec'd into it included) and starts the main process again on the same layer, ``rm -f``
drops the layer (a new ``run`` gets a new id and the image's files).

Verbs (the subset ddtree-deploy and its tests use), each logged to ``verbs.log``::

    run -d --name N [--network host] [--restart no|on-failure|always] IMAGE CMD...
    exec -i N CMD...                                 nsenter into its namespaces
    restart [-t S] N                                 SIGTERM (SIGKILL after S s), start again
    rm -f N                                          kill, drop the writable layer
    inspect [--type container] N                     [{Id, Image, Config, State, RestartCount}]
    logs [--tail K] N                                the main process's output

What a real Docker host adds: images with their own root filesystem (here only /srv is the
image; the rest is the host's), cgroups and resource limits, port publishing and bridge
networks, users, and a daemon that survives its clients. A restart policy's restart
keeps the container's init (and pid) and ends every other process in it, where Docker
starts a new init: RestartCount and StartedAt change either way.

Stdlib only; run as root by the host's /usr/bin/python3. Its state (containers, images, the
verb log) lives in the directory named by ``docker-standin.json`` beside this file.
"""

import json
import os
import secrets
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(os.path.abspath(__file__)).parent
INIT_MARKER = "_init"
START_TIMEOUT_S = 15.0
DEFAULT_STOP_TIMEOUT_S = 10.0
RESTART_POLICIES = ("no", "on-failure", "always")


def state_dir() -> Path:
    """The stand-in's state dir (containers/, images/, verbs.log), from its config file."""
    config = json.loads((HERE / "docker-standin.json").read_text())
    return Path(config["state_dir"])


def log_verb(*words: str) -> None:
    """Append one line (time, verb, its arguments) to verbs.log: tests read what ran."""
    with open(state_dir() / "verbs.log", "a") as fh:
        fh.write("{:.3f} {}\n".format(time.time(), " ".join(words)))


def fail(message: str, code: int = 1) -> int:
    print(message, file=sys.stderr)
    return code


def container_dir(name: str) -> Path:
    return state_dir() / "containers" / name


def read_config(name: str) -> dict | None:
    try:
        return json.loads((container_dir(name) / "config.json").read_text())
    except (OSError, ValueError):
        return None


def init_pid(name: str) -> int | None:
    """The host pid of the container's init while it runs, else None."""
    try:
        pid = int((container_dir(name) / "pid").read_text())
        stat = Path(f"/proc/{pid}/stat").read_text()
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
    except (OSError, ValueError):
        return None
    state = stat[stat.rfind(")") + 2 :].split()[0]
    marker = (INIT_MARKER + "\0" + str(container_dir(name))).encode()
    return pid if state != "Z" and marker in cmdline else None


def start(name: str) -> int:
    """Start the container's init (which starts its main process); 0 once it runs."""
    cdir, config = container_dir(name), read_config(name)
    (cdir / "pid").unlink(missing_ok=True)
    argv = ["unshare", "--mount", "--pid", "--fork", "--propagation", "private"]
    if config["Network"] != "host":
        argv.append("--net")
    argv += ["--", sys.executable, os.path.abspath(__file__), INIT_MARKER, str(cdir)]
    with open(cdir / "console.log", "ab") as console:
        proc = subprocess.Popen(
            argv, stdin=subprocess.DEVNULL, stdout=console, stderr=console, start_new_session=True
        )
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        if init_pid(name) is not None:
            return 0
        if proc.poll() is not None:
            return fail(f"container {name} exited at once (exit {proc.returncode})", 125)
        time.sleep(0.02)
    return fail(f"container {name} did not start in {START_TIMEOUT_S}s", 125)


def stop(name: str, timeout_s: float) -> None:
    """SIGTERM the container's init (it passes it on), SIGKILL after timeout_s; when init
    ends the kernel kills every process left in its pid namespace."""
    pid = init_pid(name)
    for signum, wait_s in ((signal.SIGTERM, timeout_s), (signal.SIGKILL, 5.0)):
        if pid is None or init_pid(name) is None:
            return
        try:
            os.kill(pid, signum)
        except ProcessLookupError:
            return
        deadline = time.monotonic() + wait_s
        while time.monotonic() < deadline and init_pid(name) is not None:
            time.sleep(0.02)


def cmd_run(args: list[str]) -> int:
    name, network, policy, rest = None, "private", "no", list(args)
    while rest and rest[0].startswith("-"):
        flag = rest.pop(0)
        if flag == "-d":
            continue
        if flag == "--name":
            name = rest.pop(0)
        elif flag == "--network":
            network = rest.pop(0)
        elif flag.startswith("--network="):
            network = flag.split("=", 1)[1]
        elif flag == "--restart" and rest and rest[0] in RESTART_POLICIES:
            policy = rest.pop(0)
        else:
            return fail(f"docker stand-in: unsupported run flag {flag}", 125)
    if not name or len(rest) < 2:
        return fail("usage: docker run -d --name N [--network host] [--restart P] IMAGE CMD", 125)
    image, cmd = rest[0], rest[1:]
    log_verb("run", name, image)
    image_dir = state_dir() / "images" / image
    if not image_dir.is_dir():
        return fail(f"Unable to find image '{image}' locally", 125)
    cdir = container_dir(name)
    if cdir.exists():
        old = read_config(name) or {}
        message = (
            f'docker: Error response from daemon: Conflict. The container name "/{name}" is '
            f'already in use by container "{old.get("Id")}".'
        )
        return fail(message, 125)
    for sub in ("upper", "work"):
        (cdir / sub).mkdir(parents=True)
    config = {
        "Id": secrets.token_hex(32),
        "Name": name,
        "Image": image,
        "ImageDir": os.path.realpath(image_dir),
        "Cmd": cmd,
        "Network": network,
        "RestartPolicy": policy,
        "Created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    (cdir / "config.json").write_text(json.dumps(config))
    code = start(name)
    if code == 0:
        print(config["Id"])
    return code


def _find_in_container(pid: int, program: str) -> bool:
    """Whether `program` (absolute, or looked up on PATH) exists in the container's root."""
    root = f"/proc/{pid}/root"
    if program.startswith("/"):
        return os.access(root + program, os.X_OK)
    dirs = ("/usr/local/sbin", "/usr/local/bin", "/usr/sbin", "/usr/bin", "/sbin", "/bin")
    return any(os.access(root + d + "/" + program, os.X_OK) for d in dirs)


def cmd_exec(args: list[str]) -> int:
    rest = list(args)
    while rest and rest[0] in ("-i", "-t", "-it", "--interactive"):
        rest.pop(0)
    if len(rest) < 2:
        return fail("usage: docker exec -i N CMD...", 125)
    name, cmd = rest[0], rest[1:]
    log_verb("exec", name, cmd[0])
    config = read_config(name)
    if config is None:
        return fail(f"Error response from daemon: No such container: {name}")
    pid = init_pid(name)
    if pid is None:
        return fail("Error response from daemon: container {} is not running".format(config["Id"]))
    if not _find_in_container(pid, cmd[0]):
        message = (
            "OCI runtime exec failed: exec failed: unable to start container process: "
            f'exec: "{cmd[0]}": stat {cmd[0]}: no such file or directory: unknown'
        )
        return fail(message, 126)
    spaces = ["-m", "-p"] + ([] if config["Network"] == "host" else ["-n"])
    argv = ["nsenter", "-t", str(pid), *spaces, "--wd=/", "--", *cmd]
    os.execvp("nsenter", argv)
    return 127  # not reached


def cmd_restart(args: list[str]) -> int:
    rest, timeout_s = list(args), DEFAULT_STOP_TIMEOUT_S
    if rest[:1] in (["-t"], ["--time"]):
        rest.pop(0)
        timeout_s = float(rest.pop(0))
    if len(rest) != 1:
        return fail("usage: docker restart [-t S] N", 125)
    name = rest[0]
    log_verb("restart", name)
    if read_config(name) is None:
        return fail(f"Error response from daemon: No such container: {name}")
    stop(name, timeout_s)
    code = start(name)
    if code == 0:
        print(name)
    return code


def cmd_rm(args: list[str]) -> int:
    rest = [a for a in args if a not in ("-f", "--force")]
    force = len(rest) != len(args)
    if len(rest) != 1:
        return fail("usage: docker rm -f N", 125)
    name = rest[0]
    log_verb("rm", name)
    if read_config(name) is None:
        return fail(f"Error response from daemon: No such container: {name}")
    if init_pid(name) is not None:
        if not force:
            return fail(f"Error response from daemon: container {name} is running: use -f")
        stop(name, 0.0)
    shutil.rmtree(container_dir(name))
    print(name)
    return 0


def cmd_inspect(args: list[str]) -> int:
    rest = list(args)
    if rest[:1] == ["--type"]:
        rest = rest[2:]
    if len(rest) != 1:
        return fail("usage: docker inspect [--type container] N", 125)
    name = rest[0]
    log_verb("inspect", name)
    config = read_config(name)
    if config is None:
        print("[]")
        return fail(f"Error: No such container: {name}")
    pid = init_pid(name)
    started = _read(container_dir(name) / "started_at")
    exit_code = _read(container_dir(name) / "exit_code")
    found = {
        "Id": config["Id"],
        "Name": "/" + name,
        "Created": config["Created"],
        "Image": "sha256:" + config["ImageDir"].encode().hex()[:64].ljust(64, "0"),
        "Config": {"Image": config["Image"], "Cmd": config["Cmd"]},
        "State": {
            "Status": "running" if pid else "exited",
            "Running": pid is not None,
            "Pid": pid or 0,
            "StartedAt": started,
            "ExitCode": 0 if pid or exit_code is None else int(exit_code),
        },
        "RestartCount": int(_read(container_dir(name) / "restart_count") or 0),
        "HostConfig": {"NetworkMode": "host" if config["Network"] == "host" else "private"},
    }
    print(json.dumps([found], indent=4))
    return 0


def _read(path: Path) -> str | None:
    try:
        return path.read_text().strip()
    except OSError:
        return None


def cmd_logs(args: list[str]) -> int:
    rest, tail = list(args), None
    if rest[:1] == ["--tail"]:
        rest.pop(0)
        tail = int(rest.pop(0))
    if len(rest) != 1 or read_config(rest[0]) is None:
        return fail("Error response from daemon: No such container: {}".format(" ".join(rest)))
    lines = (container_dir(rest[0]) / "console.log").read_text(errors="replace").splitlines()
    print("\n".join(lines[-tail:] if tail else lines))
    return 0


def container_init(cdir: Path) -> int:
    """PID 1 of a container: mount its /srv overlay and /proc, bring lo up, record its host
    pid (the container is then "running"), run the main process, pass SIGTERM on, reap
    every child, and exit with the main process's code."""
    config = json.loads((cdir / "config.json").read_text())
    host_pid = int(os.readlink("/proc/self"))  # the host's /proc: the host's pid of us
    overlay = "lowerdir={},upperdir={},workdir={}".format(
        config["ImageDir"],
        cdir / "upper",
        cdir / "work",
    )
    subprocess.run(["mount", "-t", "overlay", "overlay", "-o", overlay, "/srv"], check=True)
    subprocess.run(["mount", "-t", "proc", "proc", "/proc"], check=True)
    if config["Network"] != "host":
        subprocess.run(["ip", "link", "set", "lo", "up"], check=True)
    for stale in ("exit_code", "restart_count"):
        (cdir / stale).unlink(missing_ok=True)
    stopping: list[int] = []
    main = subprocess.Popen(config["Cmd"], stdin=subprocess.DEVNULL, cwd="/")
    signal.signal(signal.SIGTERM, lambda *_: (stopping.append(1), main.send_signal(15)))
    (cdir / "started_at").write_text(time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()))
    (cdir / "pid.tmp").write_text(str(host_pid))
    os.replace(cdir / "pid.tmp", cdir / "pid")
    restarts = 0
    while True:
        code = _wait_main(main)
        (cdir / "exit_code").write_text(str(code))
        policy = config.get("RestartPolicy", "no")
        if stopping or policy == "no" or (policy == "on-failure" and code == 0):
            return code
        # Docker's restart policy starts the container again: every process in it ends
        # (an exec'd one included), the main process starts anew, RestartCount grows.
        _kill_all_but_init()
        restarts += 1
        (cdir / "restart_count").write_text(str(restarts))
        time.sleep(min(0.1 * 2**restarts, 2.0))  # the daemon's back-off, shortened
        main = subprocess.Popen(config["Cmd"], stdin=subprocess.DEVNULL, cwd="/")
        (cdir / "started_at").write_text(time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()))


def _wait_main(main: subprocess.Popen) -> int:
    """Reap children until the main process ends; return its exit code."""
    while True:
        try:
            pid, status = os.wait()
        except ChildProcessError:
            return 0
        except InterruptedError:
            continue
        if pid == main.pid:
            return os.waitstatus_to_exitcode(status)


def _kill_all_but_init() -> None:
    """SIGKILL every process of the container's pid namespace but its init (pid 1)."""
    for entry in os.listdir("/proc"):
        if entry.isdigit() and int(entry) != 1:
            try:
                os.kill(int(entry), signal.SIGKILL)
            except ProcessLookupError:
                pass


VERBS = {
    "run": cmd_run,
    "exec": cmd_exec,
    "restart": cmd_restart,
    "rm": cmd_rm,
    "inspect": cmd_inspect,
    "logs": cmd_logs,
}


def main(argv: list[str]) -> int:
    if len(argv) == 3 and argv[1] == INIT_MARKER:
        return container_init(Path(argv[2]))
    if len(argv) < 2 or argv[1] not in VERBS:
        return fail("docker stand-in (a test fixture): verbs {}".format(", ".join(VERBS)), 125)
    return VERBS[argv[1]](argv[2:])


if __name__ == "__main__":
    sys.exit(main(sys.argv))
