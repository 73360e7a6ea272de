"""The serving gate's op, gate_measure: measure the running server (warm-up, greedy replay,
optional sustained load with health polls, /metrics before and after) and return a
GateMeasurement. It only measures; the controller compares and decides.
"""

import functools
import json
import os
import time

from . import gate_http, gate_load
from .api_key import read_api_key, redact
from .files import safe_join, write_atomic
from .private import open_private
from .wire import Code, OpFailed
from .wire_results import GateMeasurement, ReplayStats

METRICS_CHARS = 2000000
METRICS_HINT = " (is the server started with --enable-metrics?)"


def op_gate_measure(ctx, args):
    """Measure the server at args.server_url; return GateMeasurement (see GateArgs).

    The paths save_as and read_as are checked and the stored measurement read before any
    request. Without prompts, those of the stored measurement are replayed (with its
    max_new_tokens). Raises OpFailed(bad_args) without prompts or with a concurrency below 1,
    OpFailed(unsafe_path) for a path that leaves the state dir, OpFailed(api_key_unreadable)
    naming the key's file or variable, OpFailed(backup_unreadable)
    for a stored measurement that is not a JSON object, OpFailed(state_dir_unwritable) when
    save_as cannot be written (the measurement is the failure's data).
    """
    save_path = _state_path(ctx, "save_as", args.save_as) if args.save_as else None
    stored = _read_stored(_state_path(ctx, "read_as", args.read_as)) if args.read_as else None
    if not args.prompts and stored:  # replay what the stored baseline replayed
        stored_args = {"prompts": stored.get("prompts") or []}
        if stored.get("max_new_tokens"):
            stored_args["max_new_tokens"] = stored["max_new_tokens"]
        args = args.replace(**stored_args)
    _check_args(args)
    api_key, key_error = read_api_key(args.api_key_file, args.api_key_env)
    if key_error:
        raise OpFailed(Code.API_KEY_UNREADABLE, key_error)
    base = args.server_url.rstrip("/")
    opener = gate_http.build_opener(api_key)
    at = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    algorithm = gate_http.server_algorithm(opener, base, args.request_timeout_s)
    metrics_before, error_before = _metrics(opener, base, args)
    send = functools.partial(
        gate_http.generate,
        opener,
        base + "/generate",
        max_new_tokens=args.max_new_tokens,
        timeout_s=args.request_timeout_s,
    )
    for number in range(args.warmup_requests):  # not counted: the replay shows its errors
        send(args.prompts[number % len(args.prompts)])
    replay = replay_prompts(send, args.prompts, args.rounds)
    load = None
    if args.load_requests > 0 or args.bake_s > 0:
        load = gate_load.run_load(send, args.prompts, args, opener)
    metrics_after, error_after = _metrics(opener, base, args)
    measurement = GateMeasurement(
        phase=args.phase,
        at=at,
        server_url=args.server_url,
        algorithm=algorithm,
        replay=replay,
        load=load,
        metrics_before=metrics_before,
        metrics_after=metrics_after,
        metrics_error=error_before or error_after,
        saved=os.path.abspath(save_path) if save_path else None,
        prompts=list(args.prompts),
        max_new_tokens=args.max_new_tokens,
    )
    if api_key:  # a server that echoes its key (sglang's /server_info does) must not leak it
        measurement = GateMeasurement.from_dict(
            json.loads(redact(json.dumps(measurement.to_dict()), api_key))
        )
    if save_path:
        data = json.dumps(measurement.to_dict(), sort_keys=True).encode()
        try:
            _make_dirs(ctx.state_dir, os.path.dirname(args.save_as))
            write_atomic(save_path, data, 0o600)
        except OSError as exc:  # the measurement still comes back, as the failure's data
            message = "gate_measure save_as: cannot write %s: %s" % (save_path, exc)
            raise OpFailed(Code.STATE_DIR_UNWRITABLE, message, measurement.to_dict()) from None
    return measurement.replace(stored=stored)


def _check_args(args):
    """Raise OpFailed(bad_args) for arguments no measurement can use (a controller bug)."""
    if not args.prompts or not all(isinstance(p, dict) for p in args.prompts):
        raise OpFailed(
            Code.BAD_ARGS,
            "gate_measure: prompts must be a non-empty list of objects (none given, and no "
            "stored measurement holds any)",
        )
    if args.concurrency < 1:
        raise OpFailed(Code.BAD_ARGS, "gate_measure: concurrency %r < 1" % args.concurrency)
    if args.health_url and args.health_every_s <= 0:
        raise OpFailed(Code.BAD_ARGS, "gate_measure: health_every_s must be > 0")


REPLAY_GIVE_UP = 3  # consecutive replay errors after which the server counts as gone


def replay_prompts(send, prompts, rounds):
    """Send every prompt once per round, one at a time, in order; return ReplayStats.

    send(prompt) -> gate_http.Answer. outputs are the first round's output ids. After
    REPLAY_GIVE_UP consecutive errors the replay stops (a hung server would otherwise cost
    rounds x prompts x the request timeout): the first error says so, prompts never sent
    have no output.
    """
    requests = errors = tokens = verify_ct = in_a_row = 0
    first_error, per_round, latencies_s, outputs = None, [], [], []
    for number in range(rounds):
        started, round_tokens = time.monotonic(), 0
        for prompt in prompts:
            if in_a_row >= REPLAY_GIVE_UP:
                break
            answer = send(prompt)
            requests += 1
            latencies_s.append(round(answer.latency_s, 6))
            if number == 0:
                outputs.append(answer.output_ids)
            if answer.error is None:
                in_a_row = 0
                round_tokens += answer.tokens
                verify_ct += answer.verify_ct
                continue
            errors, in_a_row = errors + 1, in_a_row + 1
            first_error = first_error or answer.error
            if in_a_row == REPLAY_GIVE_UP:
                first_error += " (replay stopped after %d errors in a row)" % REPLAY_GIVE_UP
        tokens += round_tokens
        per_round.append({"tokens": round_tokens, "wall_s": round(time.monotonic() - started, 6)})
        if in_a_row >= REPLAY_GIVE_UP:
            break
    outputs += [None] * (len(prompts) - len(outputs))
    return ReplayStats(
        requests=requests,
        errors=errors,
        first_error=first_error,
        tokens=tokens,
        verify_ct=verify_ct,
        rounds=per_round,
        latencies_s=latencies_s,
        outputs=outputs,
    )


def _metrics(opener, base, args):
    """Return (/metrics text or None, error or None); (None, None) when not asked."""
    if not args.metrics:
        return None, None
    url = base + "/metrics"
    text, error = gate_http.get_text(opener, url, args.request_timeout_s, METRICS_CHARS)
    if error is not None and error.endswith("HTTP 404"):
        error += METRICS_HINT
    return text, error


def _state_path(ctx, key, rel):
    """Return the path of `rel` inside the state dir; raises OpFailed(unsafe_path) naming
    the key and the path for an absolute path, a `..` component or a way out by symlink."""
    try:
        if rel.endswith("/") or not rel.strip():
            raise OpFailed(Code.UNSAFE_PATH, "refusing path %r" % (rel,))
        return safe_join(ctx.state_dir, rel)
    except OpFailed as exc:
        raise OpFailed(Code.UNSAFE_PATH, "gate_measure %s: %s" % (key, exc)) from None


def _make_dirs(root, rel_dir):
    """Create `root` and each missing directory of `rel_dir` under it, mode 0700 (makedirs
    would give the intermediate ones the umask's mode). Raises OSError."""
    os.makedirs(root, mode=0o700, exist_ok=True)
    path = root
    for part in [p for p in rel_dir.split("/") if p and p != "."]:
        path = os.path.join(path, part)
        if not os.path.isdir(path):
            os.mkdir(path, 0o700)


def _read_stored(path):
    """Return the measurement stored at `path` (a dict), None when there is none; raises
    OpFailed(backup_unreadable) when it cannot be read or is not a JSON object."""
    try:
        with open_private(path, "r") as fh:  # the state dir's standard (private.py)
            text = fh.read()
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise OpFailed(Code.BACKUP_UNREADABLE, "%s: cannot read: %s" % (path, exc)) from None
    try:
        stored = json.loads(text)
    except ValueError as exc:
        raise OpFailed(Code.BACKUP_UNREADABLE, "%s: not JSON: %s" % (path, exc)) from None
    if not isinstance(stored, dict):
        message = "%s: not a JSON object (%s)" % (path, type(stored).__name__)
        raise OpFailed(Code.BACKUP_UNREADABLE, message)
    return stored
