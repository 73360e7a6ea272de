"""`patchset port` and `patchset diff` on the shipped patchsets and real sglang wheels.

Measured outcomes (2026-11-30), asserted below:
- ddtree 1.0.0 -> sglang 0.5.13: every patched file of 0.5.13 equals 0.5.13.post1's, so
  both patches are clean and ddtree_utils.py is carried.
- ddtree 1.0.0 -> sglang 0.5.12: spec_info.py merges; server_args.py conflicts twice (0.5.12
  handles speculative decoding inline where 0.5.13 calls speculative_hook, and lacks the
  CuteDSL token-budget method our _handle_ddtree is written after): the conflicting pair.
- ddtree 2.0.0 -> sglang 0.5.22: spec_registry.py clean; spec_info.py, arg_groups/fields/
  spec.py and speculative_hook.py merged; both new files carried.
"""

from __future__ import annotations

import json
import re
import zipfile
from dataclasses import dataclass
from pathlib import Path

from typer.testing import CliRunner

from ddtree_deploy.cli.app import app
from ddtree_deploy.patchset import load_patchset, verify_patchset, write_lock
from ddtree_deploy.patchset.diffs import unified_diff
from ddtree_deploy.patchset.materialize import digest, fetch_wheel
from ddtree_deploy.patchset.models import Target
from tests.support import REPO, copy_patchset, patchset_file

DDTREE = REPO / "patchsets" / "ddtree"
SERVER_ARGS = "sglang/srt/server_args.py"
SPEC_INFO = "sglang/srt/speculative/spec_info.py"
UTILS = "sglang/srt/speculative/ddtree_utils.py"


@dataclass(frozen=True)
class Ran:
    """One CLI run in this process (CliRunner: no interpreter start per call)."""

    returncode: int
    stdout: str
    stderr: str


def run_cli(*args: str) -> Ran:
    done = CliRunner().invoke(app, list(args), env={"COLUMNS": "200"})
    return Ran(done.exit_code, done.stdout, done.stderr)


def patchsets_with(tmp_path: Path, *versions: str) -> Path:
    """A patchsets dir in tmp_path holding copies of these ddtree versions."""
    base = tmp_path / "patchsets"
    for version in versions:
        copy_patchset(DDTREE / version, base / "ddtree" / version)
    return base


def outcomes(stderr: str) -> dict[str, str]:
    """file -> outcome, read from the port's table."""
    found = re.findall(r"(sglang/\S+)\s+│\s+(\w+)\s+│", stderr)
    return dict(found)


def tree(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*"))


def port(base: Path, ref: str, to: str, *more: str) -> Ran:
    return run_cli("patchset", "port", ref, "--to", to, "--patchsets-dir", str(base), *more)


def test_port_100_to_0513_is_clean_and_passes_the_local_gate(tmp_path):
    base = patchsets_with(tmp_path, "1.0.0")
    done = port(base, "ddtree@1.0.0", "sglang==0.5.13")
    assert done.returncode == 0, done.stderr[-3000:]
    assert outcomes(done.stderr) == {UTILS: "carried", SPEC_INFO: "clean", SERVER_ARGS: "clean"}
    ported = load_patchset(base / "ddtree" / "1.0.0+sglang0.5.13")
    assert ported.spec.ported_from == "ddtree@1.0.0" and ported.spec.target.version == "0.5.13"
    lock = verify_patchset(ported)  # apply, sha256, compile: again, from the files on disk
    old = load_patchset(DDTREE / "1.0.0").require_lock()
    assert lock.wheel.startswith("sglang-0.5.13-")
    assert {p: f.result_sha256 for p, f in lock.files.items()} == {
        p: f.result_sha256 for p, f in old.files.items()
    }  # 0.5.13's files equal 0.5.13.post1's: the same results
    for path in (SPEC_INFO, UTILS):  # clean and carried: the old bytes kept (own files now)
        entry = next(e for e in ported.spec.files if e.path == path)
        assert not entry.shared
        kept = (ported.root / entry.source).read_bytes()
        assert kept == patchset_file(DDTREE / "1.0.0", path).read_bytes()
    assert not (tmp_path / ".ddtree-port").exists()


def test_port_200_to_0522_merges_and_passes_the_local_gate(tmp_path):
    base = patchsets_with(tmp_path, "2.0.0")
    done = port(base, "ddtree@2.0.0", "sglang==0.5.22", "--as", "2.0.1")
    assert done.returncode == 0, done.stderr[-3000:]
    assert outcomes(done.stderr) == {
        UTILS: "carried",
        "sglang/srt/speculative/ddtree_algorithm.py": "carried",
        SPEC_INFO: "merged",
        "sglang/srt/speculative/spec_registry.py": "clean",
        "sglang/srt/arg_groups/fields/spec.py": "merged",
        "sglang/srt/arg_groups/speculative_hook.py": "merged",
    }
    ported = load_patchset(base / "ddtree" / "2.0.1")
    lock = verify_patchset(ported)
    assert lock.wheel.startswith("sglang-0.5.22-") and ported.spec.ported_from == "ddtree@2.0.0"
    old = load_patchset(DDTREE / "2.0.0").require_lock().files
    merged = lock.files["sglang/srt/arg_groups/speculative_hook.py"]
    assert merged.base_sha256 != old["sglang/srt/arg_groups/speculative_hook.py"].base_sha256
    assert (
        (ported.root / "patches/spec_fields.py.diff")
        .read_text()
        .startswith("--- a/sglang/srt/arg_groups/fields/spec.py\n")
    )


def resolve_with_theirs(text: str) -> str:
    """Resolve every conflict of `text` by keeping the new release's side."""
    pattern = r"^<<<<<<< .*?\n.*?^=======\n(.*?)^>>>>>>> .*?\n"
    return re.sub(pattern, r"\1", text, flags=re.S | re.M)


def test_a_conflicting_port_writes_no_patchset_then_continue_locks_it(tmp_path):
    base = patchsets_with(tmp_path, "1.0.0")
    before = tree(base)
    done = port(base, "ddtree@1.0.0", "sglang==0.5.12")
    assert done.returncode == 1, done.stderr[-3000:]
    assert outcomes(done.stderr) == {UTILS: "carried", SPEC_INFO: "merged", SERVER_ARGS: "conflict"}
    assert tree(base) == before  # no patchset written
    work = tmp_path / ".ddtree-port" / "ddtree@1.0.0+sglang0.5.12"
    assert f"  {work}/files/\n" in done.stderr
    state = json.loads((work / "port.json").read_text())
    assert state["old"] == "ddtree@1.0.0" and state["target"]["version"] == "0.5.12"
    assert [f["status"] for f in state["files"]] == ["carried", "merged", "conflict"]
    conflicted = work / "files" / SERVER_ARGS
    text = conflicted.read_text()
    assert text.count("<<<<<<< ddtree@1.0.0 (ours)\n") == 2
    assert "||||||| sglang==0.5.13.post1 (base)\n" in text and ">>>>>>> sglang==0.5.12" in text

    again = port(base, "ddtree@1.0.0", "sglang==0.5.12")  # a second port does not clobber it
    assert again.returncode == 2 and "in progress" in again.stderr

    early = port(base, "ddtree@1.0.0", "sglang==0.5.12", "--continue")  # markers still there
    assert early.returncode == 2 and "conflict markers left in" in early.stderr
    assert re.search(r"server_args\.py \(line \d+", early.stderr.replace("\n", ""))
    assert tree(base) == before

    conflicted.write_text(resolve_with_theirs(text))
    resolved = port(base, "ddtree@1.0.0", "sglang==0.5.12", "--continue")
    assert resolved.returncode == 0, resolved.stderr[-3000:]
    assert outcomes(resolved.stderr)[SERVER_ARGS] == "resolved"
    ported = load_patchset(base / "ddtree" / "1.0.0+sglang0.5.12")
    lock = verify_patchset(ported)
    assert lock.wheel.startswith("sglang-0.5.12-") and ported.spec.ported_from == "ddtree@1.0.0"
    assert not work.exists()


def test_bad_inputs_exit_2_and_write_nothing(tmp_path):
    base = patchsets_with(tmp_path, "1.0.0")
    copy_patchset(DDTREE / "1.0.0", base / "ddtree" / "1.0.1")
    toml = base / "ddtree" / "1.0.1" / "patchset.toml"
    toml.write_text(toml.read_text().replace('version = "1.0.0"', 'version = "1.0.1"', 1))
    before = tree(tmp_path)
    cases = [
        (("ddtree@9.9.9", "sglang==0.5.13"), "patchset 'ddtree@9.9.9' not found"),
        (("ddtree@1.0.0", "sglang==0.5.999"), "cannot download sglang==0.5.999"),
        (("ddtree@1.0.0", "sglang==0.5.13", "--as", "1.0.1"), "1.0.1: already exists"),
        (("ddtree@1.0.0", "vllm==0.5.13"), "targets sglang, not vllm"),
        (("ddtree@1.0.0", "sglang==0.5.13", "--continue"), "no port in progress"),
    ]
    for args, message in cases:
        done = port(base, *args)
        assert done.returncode == 2, (args, done.stderr[-2000:])
        assert message in done.stderr.replace("\n", ""), (args, done.stderr[-2000:])
        assert tree(tmp_path) == before, args


def test_diff_shows_files_and_result_diffs(tmp_path):
    common = ("--patchsets-dir", str(REPO / "patchsets"))
    shown = run_cli("patchset", "diff", "ddtree@1.0.0", "ddtree@1.1.0", *common)
    assert shown.returncode == 0, shown.stderr[-3000:]
    assert "ddtree@1.0.0 (sglang==0.5.13.post1) -> ddtree@1.1.0 (sglang==0.5.13.post1)" in (
        shown.stderr
    )
    assert shown.stdout.startswith("--- a/sglang/srt/server_args.py\n")  # the patch: data
    assert "--- a/" not in shown.stderr  # the table only (test_diff_output.py applies it)

    data = json.loads(run_cli("patchset", "diff", "ddtree@1.0.0", "ddtree@1.1.0", "--json",
                              *common).stdout)  # fmt: skip
    changes = {f["path"]: f["change"] for f in data["files"]}
    assert changes == {
        SERVER_ARGS: "changed",
        "sglang/srt/speculative/ddtree_info.py": "only_b",
        UTILS: "same",
        "sglang/srt/speculative/ddtree_worker_utils.py": "only_b",
        "sglang/srt/speculative/dflash_worker.py": "only_b",
        SPEC_INFO: "same",
    }
    server_args = next(f for f in data["files"] if f["path"] == SERVER_ARGS)
    assert server_args["added"] > 0 and server_args["diff"].startswith("--- a/sglang/")
    info = next(f for f in data["files"] if f["path"].endswith("/ddtree_info.py"))
    info_path = patchset_file(DDTREE / "1.1.0", info["path"])
    assert info["added"] == len(info_path.read_text().splitlines())  # a new file: all lines
    assert info["diff"].startswith("--- /dev/null\n+++ b/sglang/") and info["removed"] == 0
    assert data["a"] == {"ref": "ddtree@1.0.0", "target": "sglang==0.5.13.post1"}
    same = json.loads(run_cli("patchset", "diff", "ddtree@1.0.0", "ddtree@1.0.0", "--json",
                              *common).stdout)  # fmt: skip
    assert {f["change"] for f in same["files"]} == {"same"}  # the control

    missing = run_cli("patchset", "diff", "ddtree@1.0.0", "ddtree@7.0.0", "--json", *common)
    assert missing.returncode == 2 and missing.stdout == ""
    assert "patchset 'ddtree@7.0.0' not found" in missing.stderr


def add_entry(root: Path, path: str, kind: str, source: str, text: str) -> None:
    """Add a [[file]] of `kind` to the patchset at `root`, its source holding `text`; lock."""
    (root / source).parent.mkdir(parents=True, exist_ok=True)
    (root / source).write_text(text)
    spec = root / "patchset.toml"
    table = f'[[file]]\npath = "{path}"\n{kind} = "{source}"\n\n[smoke]'
    spec.write_text(spec.read_text().replace("[smoke]", table, 1))
    write_lock(load_patchset(root), replace=True)


def test_a_file_gone_from_the_release_stops_the_port(tmp_path):
    base = patchsets_with(tmp_path, "1.0.0")
    wrapper = "sglang/srt/distributed/parallel_state_wrapper.py"  # in 0.5.13.post1, not 0.5.12
    with zipfile.ZipFile(fetch_wheel(Target(package="sglang", version="0.5.13.post1"))) as zf:
        pristine = zf.read(wrapper).decode()
    diff = unified_diff(wrapper, pristine, pristine + "# ddtree\n")
    add_entry(base / "ddtree" / "1.0.0", wrapper, "patch", "patches/wrapper.diff", diff)
    before = tree(tmp_path)
    done = port(base, "ddtree@1.0.0", "sglang==0.5.12")
    assert done.returncode == 1, done.stderr[-3000:]
    assert outcomes(done.stderr)[wrapper] == "gone"
    assert "gone: a patched file no longer exists in sglang==0.5.12" in done.stderr
    assert tree(tmp_path) == before  # no patchset, no work dir: --continue cannot fix it


def test_a_new_file_the_release_ships_is_a_conflict_and_becomes_a_patch(tmp_path):
    base = patchsets_with(tmp_path, "1.0.0")
    cast = "sglang/jit_kernel/cast.py"  # in 0.5.12, not in 0.5.13.post1
    add_entry(base / "ddtree" / "1.0.0", cast, "new", f"files/{cast}", "OURS = 1\n")
    work = tmp_path / "work"
    more = ("--as", "1.0.1", "--work-dir", str(work))
    done = port(base, "ddtree@1.0.0", "sglang==0.5.12", *more)
    assert done.returncode == 1, done.stderr[-3000:]
    assert outcomes(done.stderr)[cast] == "conflict"
    assert not (tmp_path / ".ddtree-port").exists()
    assert f"--continue --as 1.0.1 --work-dir {work}\n" in done.stderr
    with zipfile.ZipFile(fetch_wheel(Target(package="sglang", version="0.5.12"))) as zf:
        theirs = zf.read(cast).decode()
    assert "OURS = 1" in (work / "files" / cast).read_text()
    (work / "files" / cast).write_text(theirs + "OURS = 1\n")
    server_args = work / "files" / SERVER_ARGS
    server_args.write_text(resolve_with_theirs(server_args.read_text()))
    resolved = port(base, "ddtree@1.0.0", "sglang==0.5.12", *more, "--continue")
    assert resolved.returncode == 0, resolved.stderr[-3000:]
    ported = load_patchset(base / "ddtree" / "1.0.1")
    entry = next(e for e in ported.spec.files if e.path == cast)
    assert (entry.kind, entry.source) == ("patch", "patches/cast.py.diff")
    assert not (ported.root / "files" / cast).exists()
    lock = verify_patchset(ported)
    assert lock.files[cast].result_sha256 == digest((theirs + "OURS = 1\n").encode())
