"""known_hosts matching as OpenSSH does it, checked against OpenSSH's own tools (ssh-keygen
hashes the names and prints the fingerprints we must equal)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import paramiko
import pytest

from ddtree_deploy.transport.known_hosts import (
    KnownHostsFile,
    fingerprint,
    judge_key,
    known_name,
    preferred_algorithms,
)
from ddtree_deploy.transport.ssh_hops import _known_hosts_file


def find_known_keys(text: str, source: str, name: str):
    """The keys `text` (a known_hosts file named `source`) lists for `name`."""
    return KnownHostsFile(text, source).keys_for(name)


def _keypair(tmp_path: Path, name: str, kind: str = "ed25519") -> tuple[paramiko.PKey, str]:
    path = tmp_path / name
    subprocess.run(["ssh-keygen", "-q", "-t", kind, "-N", "", "-f", str(path)], check=True)
    public = path.with_name(name + ".pub").read_text()
    return paramiko.PKey.from_path(path), " ".join(public.split()[:2])


def test_fingerprint_is_what_ssh_keygen_prints(tmp_path):
    key, _ = _keypair(tmp_path, "k")
    printed = subprocess.run(
        ["ssh-keygen", "-l", "-f", str(tmp_path / "k.pub")], capture_output=True, text=True
    ).stdout.split()[1]
    assert fingerprint(key) == printed and printed.startswith("SHA256:")


def test_hashed_and_port_entries_written_by_ssh_keygen_match(tmp_path):
    key, public = _keypair(tmp_path, "k")
    known = tmp_path / "known_hosts"
    known.write_text(f"[10.0.0.5]:2222 {public}\ngpu7 {public}\n")
    subprocess.run(["ssh-keygen", "-q", "-H", "-f", str(known)], check=True, capture_output=True)
    text = known.read_text()
    assert "|1|" in text and "gpu7" not in text  # hashed by OpenSSH itself
    for name in (known_name("10.0.0.5", 2222), known_name("gpu7", 22)):
        found = find_known_keys(text, str(known), name)
        assert judge_key(found, key).status == "ok", name
    assert find_known_keys(text, str(known), "10.0.0.5") == []  # port 22 is another entry
    assert find_known_keys(text, str(known), "[gpu7]:2222") == []


def test_patterns_negation_and_markers(tmp_path):
    key, public = _keypair(tmp_path, "k")
    text = (
        f"# comment\n\n*.gpu.example,!bad.gpu.example {public}\n"
        f"@cert-authority * {public}\ngarbage line\nx ssh-ed25519 !!notbase64\n"
    )
    assert judge_key(find_known_keys(text, "f", "a.gpu.example"), key).status == "ok"
    assert find_known_keys(text, "f", "bad.gpu.example") == []
    assert find_known_keys(text, "f", "other.example") == []  # cert-authority skipped
    revoked = find_known_keys(f"a.example {public}\n@revoked * {public}\n", "f", "a.example")
    assert judge_key(revoked, key).status == "revoked"


def test_changed_unknown_and_accepted_from_any_file(tmp_path):
    key, public = _keypair(tmp_path, "k")
    _, other = _keypair(tmp_path, "o")
    _, rsa = _keypair(tmp_path, "r", "rsa")
    stale = find_known_keys(f"h {other}\n", "stale", "h")
    verdict = judge_key(stale, key)
    assert verdict.status == "changed" and verdict.expected.where == "stale:1"
    current = find_known_keys(f"h {public}\n", "current", "h")
    assert judge_key(stale + current, key).status == "ok"  # listed in ANY file: accepted
    assert judge_key(find_known_keys(f"h {rsa}\n", "f", "h"), key).status == "unknown"
    assert judge_key([], key).status == "unknown"


def test_known_key_types_are_asked_for_first(tmp_path):
    _, rsa = _keypair(tmp_path, "r", "rsa")
    offered = ["ssh-ed25519", "ecdsa-sha2-nistp256", "rsa-sha2-512", "rsa-sha2-256", "ssh-rsa"]
    known = find_known_keys(f"h {rsa}\n", "f", "h")
    assert preferred_algorithms(known, offered) == [
        "rsa-sha2-512", "rsa-sha2-256", "ssh-rsa", "ssh-ed25519", "ecdsa-sha2-nistp256",
    ]  # fmt: skip
    assert preferred_algorithms([], offered) == offered


@pytest.mark.parametrize("port, name", [(22, "h"), (2222, "[h]:2222")])
def test_known_name(port, name):
    assert known_name("h", port) == name


def test_one_parse_serves_every_name_in_line_order(tmp_path):
    """A fleet's file is parsed once (KnownHostsFile): plain names from the index, hashed
    names and patterns matched per name, the keys in line order whichever way they came."""
    key, public = _keypair(tmp_path, "k")
    hashed = paramiko.HostKeys.hash_host("gpu.lab")
    parsed = KnownHostsFile(
        f"*.lab {public}\nother,GPU.lab,Gpu.Lab {public}\n{hashed} {public}\n"
        f"|1|not-base64!|x== {public}\n|1|c2FsdA==|aGFzaA== {public}\n"
        f"@revoked gpu.lab {public}\nnothere {public}\n",
        "f",
    )
    assert [k.where for k in parsed.keys_for("gpu.lab")] == ["f:1", "f:2", "f:3", "f:6"]
    assert [k.where for k in parsed.keys_for("GPU.LAB")] == ["f:1", "f:2", "f:6"]  # hashed: exact
    assert [k.where for k in parsed.keys_for("other")] == ["f:2"]
    assert parsed.keys_for("nothere.lab")[0].where == "f:1" and parsed.keys_for("x") == []
    assert judge_key(parsed.keys_for("gpu.lab"), key).status == "revoked"
    assert find_known_keys(f"{hashed} {public}\n", "f", "gpu.lab")[0].where == "f:1"


def test_a_known_hosts_file_is_read_once_while_unchanged(tmp_path):
    key, public = _keypair(tmp_path, "k")
    other_key, other = _keypair(tmp_path, "o")
    path = tmp_path / "known_hosts"
    path.write_text(f"h {public}\n")
    first = _known_hosts_file(path)
    assert first is not None and _known_hosts_file(path) is first
    path.write_text(f"h {public}\nh2 {other}\n")  # a key added while a run goes on is seen
    second = _known_hosts_file(path)
    assert second is not first and judge_key(second.keys_for("h2"), other_key).status == "ok"
    assert _known_hosts_file(tmp_path / "missing") is None and _known_hosts_file(tmp_path) is None
