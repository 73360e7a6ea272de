"""The server suite's `reference` check in verify mode: which recorded greedy outputs the
lossless checks compare against (shipped references first, then what mode record wrote
before the restart), and, when there is none, why, with what the last record attempt did.

Shipped beside every smoke suite (run by the host's python); stdlib only.
"""

import json
import os

import _lossless as lossless

LAST_RECORD = "last-record"  # in record_dir: mode record's last outcome, for explain_record


def no_reference(suite, required, lines):
    """Add `reference` as failed (required) or as a skipped check saying why there is none."""
    if required:
        suite.check("reference", False, lossless.bounded(lines))
        return
    lines = [f"skipped (not required): {lines[0]}: lossless checks not run"] + lines[1:]
    suite.check("reference", True, lossless.bounded(lines))
    suite.checks[-1]["skipped"] = True


def find_expected(suite, info, settings):
    """Add the `reference` check -> {prompt index: reference output ids}, or None if none."""
    required = settings["required"]
    if info is None:
        no_reference(suite, required, ["no /server_info: cannot tell which model the server runs"])
        return None
    fingerprint, dtype, model_dir, problem = lossless.identify_model(info)
    if problem:
        no_reference(suite, required, [f"cannot tell which model the server runs: {problem}"])
        return None
    record_dir = settings["record_dir"]
    reference, origin, notes = lossless.choose_reference(
        settings["references"], record_dir, fingerprint, dtype, settings["sampling_params"]
    )
    if reference is None:
        lines = [
            f"no reference for the running model: fingerprint {fingerprint[:12]} {dtype}",
            f"running: {model_dir}, fingerprint {fingerprint}, dtype {dtype}",
        ]
        lines += notes if settings["references"] else ["no shipped references"] + notes
        lines.append(explain_record(record_dir, fingerprint, dtype))
        no_reference(suite, required, lines)
        return None
    settings["chosen"] = reference
    outputs = lossless.outputs_by_prompt(reference)
    prompts = settings["prompts"]
    expected = {}
    for i, prompt in enumerate(prompts):
        if lossless.prompt_key(prompt) in outputs:
            expected[i] = outputs[lossless.prompt_key(prompt)]
    missing = [f"prompt {i + 1}/{len(prompts)}" for i in range(len(prompts)) if i not in expected]
    if missing:
        first = f"reference has no output for {', '.join(missing[:5])}"
        labels = [lossless.prompt_label(p) for i, p in enumerate(prompts) if i not in expected]
        suite.check("reference", False, lossless.bounded([f"{first}: {origin}"] + labels))
    else:
        summary = f"reference for {fingerprint[:12]} {dtype}: {origin}"
        source = f"source: {reference.get('source')}"
        suite.check("reference", True, f"{summary}\n{source}\n{len(prompts)} prompts")
    return expected


def explain_record(record_dir, fingerprint, dtype):
    """Why record_dir holds no reference: what the last record attempt before a restart did."""
    if not record_dir:
        return "nothing can have been recorded: no record_dir"
    try:
        with open(os.path.join(record_dir, LAST_RECORD), encoding="utf-8") as fh:
            note = json.load(fh)
    except (OSError, ValueError):
        return "no record attempt seen: mode record runs before a restart, on a plain server"
    attempt = f"the last record attempt ({note.get('at')}, {note.get('url')})"
    if note.get("recorded") is None:
        return f"{attempt}: {note.get('reason')}"
    if os.path.basename(str(note["recorded"])) != lossless.reference_filename(fingerprint, dtype):
        return f"{attempt} recorded another model: {note['recorded']}"
    return f"{attempt} wrote {note['recorded']}"
