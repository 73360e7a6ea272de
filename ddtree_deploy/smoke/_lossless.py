"""The lossless gate's support: model fingerprint, reference files, token comparison.

Shipped beside every smoke suite (run by the host's python) and imported by path on the
controller to stamp shipped references, so it is stdlib only and does nothing on import.

A reference is what the target model generates greedily, without speculation, for a set of
prompts. Greedy speculative decoding must reproduce it token for token. The format (one JSON
file per model and dtype, `<fingerprint>-<dtype>.json`):

    {"format": 1, "model": label, "fingerprint": hex, "dtype": "float32", "source": text,
     "max_new_tokens": 64, "sampling_params": {...},
     "outputs": [{"prompt": {"input_ids": [...]} | {"text": "..."}, "output_ids": [...]}]}
"""

import hashlib
import json
import os
import struct
import tempfile

REFERENCE_FORMAT = 1
FULL_HASH_MAX_BYTES = 256 * 1024 * 1024  # bigger weight files: only their header is hashed
_HEADER_MAX_BYTES = 100 * 1024 * 1024  # a safetensors JSON header larger than this is corrupt
_CHUNK_BYTES = 1024 * 1024
_TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json")
# sglang 0.5.13.post1 configs/model_config.py: _STR_DTYPE_TO_TORCH_DTYPE
_DTYPE_NAMES = {
    "half": "float16",
    "float16": "float16",
    "float": "float32",
    "float32": "float32",
    "bfloat16": "bfloat16",
}


def model_fingerprint(model_dir, tokenizer_dir=None):
    """Return the sha256 hex of a model folder's config, tokenizer and weights.

    Hashed in this order, each entry framed by its name and length: config.json;
    tokenizer.json and tokenizer_config.json from `tokenizer_dir` (default `model_dir`) when
    present; then every top-level *.safetensors, sorted by name, with its size in bytes and
    either its whole content (up to FULL_HASH_MAX_BYTES) or only its header (the 8-byte
    length and the JSON header). File names, not paths, are hashed: the same model in
    another folder has the same fingerprint. Raises OSError when config.json is unreadable,
    ValueError when there is no *.safetensors or one has no valid header.
    """
    digest = hashlib.sha256(b"ddtree-deploy model fingerprint 1\n")
    _hash_bytes(digest, "config.json", _read(os.path.join(model_dir, "config.json")))
    tokenizer_dir = tokenizer_dir or model_dir
    for name in _TOKENIZER_FILES:
        path = os.path.join(tokenizer_dir, name)
        if os.path.isfile(path):
            _hash_bytes(digest, name, _read(path))
    weights = sorted(n for n in os.listdir(model_dir) if n.endswith(".safetensors"))
    if not weights:
        raise ValueError(f"{model_dir}: no *.safetensors: the weights cannot be fingerprinted")
    for name in weights:
        path = os.path.join(model_dir, name)
        size_bytes = os.path.getsize(path)
        if size_bytes <= FULL_HASH_MAX_BYTES:
            digest.update(f"weights {name} {size_bytes} full\n".encode())
            with open(path, "rb") as fh:
                for chunk in iter(lambda: fh.read(_CHUNK_BYTES), b""):
                    digest.update(chunk)
        else:
            _hash_bytes(digest, f"weights {name} {size_bytes} header", safetensors_header(path))
    return digest.hexdigest()


def safetensors_header(path):
    """Return a safetensors file's 8-byte little-endian length plus its JSON header.

    Raises ValueError when the length is impossible or the header is not a JSON object.
    """
    size_bytes = os.path.getsize(path)
    with open(path, "rb") as fh:
        prefix = fh.read(8)
        if len(prefix) < 8:
            raise ValueError(f"{path}: shorter than a safetensors header")
        (length,) = struct.unpack("<Q", prefix)
        if length > min(_HEADER_MAX_BYTES, size_bytes - 8):
            raise ValueError(f"{path}: safetensors header length {length} is impossible")
        header = fh.read(length)
    try:
        if not isinstance(json.loads(header), dict):
            raise ValueError("not an object")
    except ValueError as exc:
        raise ValueError(f"{path}: safetensors header is not a JSON object: {exc}") from exc
    return prefix + header


def effective_dtype(server_dtype, config):
    """Return the dtype sglang really runs: `--dtype`, or for "auto" what config.json implies.

    Mirrors sglang 0.5.13.post1 configs/model_config.py `_get_and_verify_dtype`: config
    `dtype` (else `torch_dtype`), missing or unknown meaning float32; "auto" turns float32
    into float16 (bfloat16 for gemma models) and keeps float16/bfloat16.
    """
    name = str(server_dtype or "auto").lower()
    if name != "auto":
        return _DTYPE_NAMES.get(name, name)
    config = config if isinstance(config, dict) else {}
    declared = config.get("dtype") or config.get("torch_dtype")
    config_dtype = _DTYPE_NAMES.get(str(declared).lower(), "float32") if declared else "float32"
    if config_dtype != "float32":
        return config_dtype
    return "bfloat16" if str(config.get("model_type") or "").startswith("gemma") else "float16"


def resolve_model_dir(model_path, revision=None):
    """Return the local folder of `model_path` (a folder, or a hub id in the HF cache), or None."""
    if not model_path:
        return None
    if os.path.isdir(model_path):
        return model_path
    caches = [os.environ.get("HF_HUB_CACHE"), os.environ.get("HUGGINGFACE_HUB_CACHE")]
    home = os.environ.get("HF_HOME") or os.path.expanduser("~/.cache/huggingface")
    caches.append(os.path.join(home, "hub"))
    repo = "models--" + str(model_path).replace("/", "--")
    for cache in filter(None, caches):
        snapshots = os.path.join(cache, repo, "snapshots")
        ref = os.path.join(cache, repo, "refs", revision or "main")
        commit = _read(ref).decode().strip() if os.path.isfile(ref) else revision
        if commit and os.path.isdir(os.path.join(snapshots, commit)):
            return os.path.join(snapshots, commit)
    return None


def identify_model(info):
    """From /server_info -> (fingerprint, dtype, model_dir, problem); problem "" on success."""
    model_path = info.get("model_path")
    model_dir = resolve_model_dir(model_path, info.get("revision"))
    if model_dir is None:
        return None, None, None, f"model_path {model_path!r} is no folder on this host"
    tokenizer_path = info.get("tokenizer_path")
    tokenizer_dir = None
    if tokenizer_path and tokenizer_path != model_path:
        tokenizer_dir = resolve_model_dir(tokenizer_path, info.get("revision"))
        if tokenizer_dir is None:
            return None, None, model_dir, f"tokenizer_path {tokenizer_path!r} is no folder here"
    try:
        config = json.loads(_read(os.path.join(model_dir, "config.json")))
        fingerprint = model_fingerprint(model_dir, tokenizer_dir)
    except (OSError, ValueError) as exc:
        return None, None, model_dir, f"cannot fingerprint {model_dir}: {exc}"
    return fingerprint, effective_dtype(info.get("dtype"), config), model_dir, ""


def greedy_sampling_params(max_new_tokens):
    """Return the sampling_params of every lossless request and of every reference.

    Temperature 0 is greedy; ignore_eos makes every output exactly max_new_tokens long, so
    each comparison covers the same number of tokens whatever the model emits.
    """
    return {"temperature": 0, "max_new_tokens": int(max_new_tokens), "ignore_eos": True}


def check_prompt(prompt):
    """Return "" for a valid prompt ({"input_ids": [int, ...]} or {"text": str}), else why not."""
    if isinstance(prompt, dict) and set(prompt) == {"input_ids"}:
        ids = prompt["input_ids"]
        if isinstance(ids, list) and ids and all(type(t) is int for t in ids):
            return ""
    if isinstance(prompt, dict) and set(prompt) == {"text"} and isinstance(prompt["text"], str):
        return ""
    return f'expected {{"input_ids": [int, ...]}} or {{"text": str}}, got {str(prompt)[:80]}'


def prompt_key(prompt):
    """Return a canonical string for matching a prompt with a reference's outputs."""
    return json.dumps(prompt, sort_keys=True, separators=(",", ":"))


def prompt_label(prompt):
    """Return a short, readable form of a prompt for messages."""
    if "input_ids" in prompt:
        ids = prompt["input_ids"]
        return "input_ids " + str(ids[:6])[:-1] + (", …]" if len(ids) > 6 else "]")
    text = prompt["text"]
    return repr(text[:30] + ("…" if len(text) > 30 else ""))


def reference_filename(fingerprint, dtype):
    return f"{fingerprint}-{dtype}.json"


def choose_reference(shipped, record_dir, fingerprint, dtype, sampling_params):
    """Pick the reference for (fingerprint, dtype): shipped ones first, then record_dir.

    Returns (reference or None, where it came from, notes): one note per reference looked
    at and not taken, saying why, so that a missing reference can be explained.
    """
    notes: list[str] = []
    for i, candidate in enumerate(shipped or []):
        where = f"shipped reference {i + 1} ({_describe(candidate)})"
        why = _unusable(candidate, fingerprint, dtype, sampling_params)
        if not why:
            return candidate, where, notes
        notes.append(f"{where}: {why}")
    if not record_dir:
        notes.append("no record_dir given: recorded references not looked for")
        return None, "", notes
    path = os.path.join(record_dir, reference_filename(fingerprint, dtype))
    if not os.path.isfile(path):
        others = _listing(record_dir)
        notes.append(f"{record_dir}: no {os.path.basename(path)} (there: {others})")
        return None, "", notes
    try:
        candidate = json.loads(_read(path))
    except (OSError, ValueError) as exc:
        notes.append(f"{path}: unreadable: {exc}")
        return None, "", notes
    why = _unusable(candidate, fingerprint, dtype, sampling_params)
    if why:
        notes.append(f"{path}: {why}")
        return None, "", notes
    return candidate, path, notes


def _unusable(reference, fingerprint, dtype, sampling_params):
    if not isinstance(reference, dict) or reference.get("format") != REFERENCE_FORMAT:
        return f"not a format {REFERENCE_FORMAT} reference"
    if reference.get("fingerprint") != fingerprint:
        return f"fingerprint {str(reference.get('fingerprint'))[:12]} is another model"
    if reference.get("dtype") != dtype:
        return f"dtype {reference.get('dtype')} differs"
    if reference.get("sampling_params") != sampling_params:
        return f"sampling_params {reference.get('sampling_params')} differ from {sampling_params}"
    if not isinstance(reference.get("outputs"), list):
        return "no outputs list"
    return ""


def _describe(reference):
    if not isinstance(reference, dict):
        return "not an object"
    fingerprint = str(reference.get("fingerprint"))[:12]
    return f"{reference.get('model')!r} {fingerprint} {reference.get('dtype')}"


def _listing(folder):
    try:
        names = sorted(n for n in os.listdir(folder) if n.endswith(".json"))
    except OSError as exc:
        return f"unreadable: {exc.strerror or exc}"
    more = f" and {len(names) - 6} more" if len(names) > 6 else ""
    return ", ".join(names[:6]) + more if names else "none"


def outputs_by_prompt(reference):
    """Return {prompt_key: output_ids} of a reference's well-formed outputs."""
    found = {}
    for entry in reference.get("outputs") or []:
        if isinstance(entry, dict) and isinstance(entry.get("prompt"), dict):
            if isinstance(entry.get("output_ids"), list):
                found[prompt_key(entry["prompt"])] = entry["output_ids"]
    return found


def describe_difference(expected, got):
    """Return None when the token lists are equal, else where and how they first differ.

    Token positions count from 0 over the generated ids.
    """
    for position, (want, have) in enumerate(zip(expected, got)):
        if want != have:
            return f"first difference at token {position}: expected {want}, got {have}"
    if len(expected) == len(got):
        return None
    position = min(len(expected), len(got))
    want = expected[position] if position < len(expected) else "the end"
    have = got[position] if position < len(got) else "the end"
    return f"first difference at token {position}: expected {want}, got {have}"


def compare_outputs(url, results, prompts, expected, seconds):
    """Each request's output ids against the reference's -> (passed, detail).

    results: [(prompt index, answer dict with output_ids or None, problem)] in request order;
    expected: {prompt index: reference output ids} (prompts without one are not compared).
    The detail's first line names the first request that differs and where, e.g.
    `prompt 3/8: first difference at token 17: expected 5, got 12 (7/8 identical)`.
    """
    n_prompts, n_requests = len(prompts), len(results)
    unit = "requests" if n_requests > n_prompts else "prompts"
    compared = [(j, r) for j, r in enumerate(results) if r[0] in expected]
    bad, lines, identical, tokens = [], [], 0, 0
    for j, (i, answer, problem) in compared:
        where = f"prompt {i + 1}/{n_prompts}"
        if n_requests > n_prompts:
            where += f" (request {j + 1}/{n_requests})"
        got = answer["output_ids"] if answer is not None else None
        difference = problem if got is None else describe_difference(expected[i], got)
        if difference is None:
            identical, tokens = identical + 1, tokens + len(got or ())
            continue
        bad.append(f"{where}: {difference}")
        lines.append(f"{where} {prompt_label(prompts[i])}: {difference}")
        if got is not None:
            lines.append("  " + _window(expected[i], got))
    if not compared:
        return False, "no prompt has an output in the reference: nothing compared"
    timing = f"{n_requests} requests in {seconds:.1f}s"
    if not bad:
        summary = f"{identical}/{len(compared)} {unit} identical to the reference"
        return True, f"{summary} ({tokens} tokens, {timing})\nPOST {url}"
    head = [f"{bad[0]} ({identical}/{len(compared)} identical)", f"POST {url}, {timing}:"]
    return False, bounded(head + lines)


def _window(expected, got):
    """`expected …[a, b, c]… got …[a, x, y]…` around the first difference."""
    at = next((k for k, (a, b) in enumerate(zip(expected, got)) if a != b), None)
    at = min(len(expected), len(got)) if at is None else at
    low, high = max(0, at - 3), at + 5
    return f"tokens {low}..: expected {expected[low:high]}, got {got[low:high]}"


def check_acceptance(url, results, min_accept_length):
    """Drafts verified on every answered request, and their aggregate accept length.

    Accept length = sum(completion_tokens) / sum(spec_verify_ct) over every answer in
    results (as for compare_outputs); sglang leaves spec_verify_ct out when it is 0.
    Returns (passed, detail); the first line says the length and verify count it ran at.
    """
    answers = [a for _, a, _ in results if a is not None]
    if not answers:
        return False, f"POST {url}: no lossless request was answered: accept length unknown"
    tokens_total, verify_total, unverified = 0, 0, []
    for j, answer in enumerate(answers):
        meta = answer.get("meta_info") or {}
        completion = meta.get("completion_tokens")
        tokens_total += completion if type(completion) is int else len(answer["output_ids"])
        verify_ct = meta.get("spec_verify_ct")
        if type(verify_ct) is int and verify_ct > 0:
            verify_total += verify_ct
        else:
            unverified.append(f"request {j + 1}: spec_verify_ct {verify_ct!r}")
    accept_length = tokens_total / verify_total if verify_total else 0.0
    measured = (
        f"accept length {accept_length:.2f} over {len(answers)} requests "
        f"(spec_verify_ct {verify_total})"
    )
    if unverified:
        first = f"spec_verify_ct expected > 0 on every request, {len(unverified)} without; "
        return False, bounded([first + measured, f"POST {url}"] + unverified)
    if accept_length < min_accept_length:
        return False, f"{measured}, below min {min_accept_length}\nPOST {url}"
    return True, f"{measured}, min {min_accept_length}\nPOST {url}"


def bounded(lines, limit_chars=1900):
    """Join lines, dropping whole lines from the end so that the first line always survives."""
    kept: list[str] = []
    used = 0
    for k, line in enumerate(lines):
        line = line[:300]
        if kept and used + len(line) + 1 > limit_chars:
            kept.append(f"… {len(lines) - k} more lines")
            break
        kept.append(line)
        used += len(line) + 1
    return "\n".join(kept)


def write_json_atomic(path, obj):
    """Write obj as JSON to path atomically (mode 0600; its folder created 0700 if missing)."""
    folder = os.path.dirname(path) or "."
    os.makedirs(folder, mode=0o700, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=folder, prefix=".tmp-", suffix=".json")  # mkstemp: 0600
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            json.dump(obj, fh, indent=1, sort_keys=True)
            fh.write("\n")
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def _hash_bytes(digest, name, data):
    digest.update(f"{name} {len(data)}\n".encode())
    digest.update(data)


def _read(path):
    with open(path, "rb") as fh:
        return fh.read()
