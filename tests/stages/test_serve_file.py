"""The serve file: merging a patchset's [serve] with a host's, rendering, reading it back,
redaction, refusals; and the agent's backup/install/restore of it (a bare python3 agent)."""

from __future__ import annotations

import base64
import hashlib
from pathlib import Path

import pytest
from pydantic import ValidationError

from ddtree_deploy.inventory.models import Host
from ddtree_deploy.inventory.service import ServiceSpec
from ddtree_deploy.patchset.models import ServeConfig
from ddtree_deploy.stages.op_builders import plan_serve_file, serve_spec
from ddtree_deploy.stages.serve_file import (
    merge_serve_args,
    parse_serve_file,
    redact_args,
    render_serve_file,
    split_flags,
)
from tests.agent.bare import run_agent

PATCHSET_ARGS = ["--speculative-algorithm", "DDTREE", "--speculative-ddtree-budget", "8"]
HOST_ARGS = ["--model-path", "/m", "--port", "30000", "--speculative-ddtree-budget", "4"]


def test_host_flags_come_first_and_replace_the_patchsets_of_the_same_name():
    merged = merge_serve_args(PATCHSET_ARGS, HOST_ARGS)
    assert merged == [*HOST_ARGS, "--speculative-algorithm", "DDTREE"]
    assert split_flags(["--a", "1", "2", "--b"]) == [("--a", ("1", "2")), ("--b", ())]
    with pytest.raises(ValueError, match="must start with a --flag"):
        split_flags(["x"])


def test_render_then_parse_gives_back_the_flags_and_env_and_names_the_patchset():
    serve = render_serve_file("/s.env", "ddtree@1.1.0", PATCHSET_ARGS, {"A": "1"}, HOST_ARGS,
                              {"A": "2", "B": ""})  # fmt: skip
    text = serve.content.decode()
    assert text.startswith("# Written by ddtree-deploy for ddtree@1.1.0")
    assert 'SGLANG_ARGS="--model-path /m' in text
    args, env = parse_serve_file(text)
    assert args == list(serve.args) and env == {"A": "2", "B": ""}
    assert serve.flag("--speculative-algorithm") == "DDTREE"
    assert serve.flag("--speculative-ddtree-budget") == "4"
    # Same inputs, same bytes: an unchanged host is "no changes".
    again = render_serve_file("/s.env", "ddtree@1.1.0", PATCHSET_ARGS, {"A": "1"}, HOST_ARGS,
                              {"A": "2", "B": ""})  # fmt: skip
    assert again.content == serve.content


def test_secrets_never_show():
    assert redact_args(["--api-key", "s3cret", "--port", "1"]) == ["--api-key", "***", "--port",
                                                                   "1"]  # fmt: skip
    serve = render_serve_file("/s", "p@1", [], {}, ["--api-key", "s3cret"], {"HF_TOKEN": "tok"})
    shown = serve.describe()
    assert "s3cret" not in shown and "tok" not in shown and "***" in shown


@pytest.mark.parametrize(
    "args, message",
    [
        (["--x", "a b"], "' '"),
        (["--x", 'a"b'], "'\"'"),
        (["--x", "$HOME"], r"'\$'"),
        (["value-first"], "must start with a --flag"),
    ],
)
def test_arguments_the_file_cannot_carry_are_refused(args, message):
    with pytest.raises(ValidationError, match=message):
        ServeConfig(args=args)


def test_env_names_must_be_identifiers_and_not_sglang_args():
    with pytest.raises(ValidationError, match="not allowed"):
        ServeConfig(env={"SGLANG_ARGS": "x"})
    with pytest.raises(ValidationError, match="not allowed"):
        ServeConfig(env={"1X": "x"})


def test_a_host_without_args_file_is_refused_naming_host_and_key():
    from tests.stages.fixtures import prepared_with_serve

    host = Host(name="h1", address="10.0.0.1",
                service=ServiceSpec(kind="command", start="a", stop="b"))  # fmt: skip
    with pytest.raises(ValueError, match="host 'h1'.*service.args_file"):
        plan_serve_file(host, prepared_with_serve())
    none = Host(name="h2", address="10.0.0.2")  # no service: flags are not written
    assert plan_serve_file(none, prepared_with_serve()) is None
    with pytest.raises(ValidationError, match="absolute"):
        ServiceSpec(kind="none", args_file="relative/serve.env")


def agent(state_dir: Path, *ops: tuple[str, dict]) -> dict:
    """One request to a bare `python3 -c` agent process (the real bundle); its answer."""
    return run_agent(state_dir, *ops)


def test_agent_backs_up_installs_and_restores_the_serve_file_byte_for_byte(tmp_path):
    site, state = tmp_path / "site", tmp_path / "state"
    site.mkdir()
    serve_path = tmp_path / "etc" / "serve.env"
    serve_path.parent.mkdir()
    original = b'SGLANG_ARGS="--speculative-algorithm DFLASH"\n'
    serve_path.write_bytes(original)
    serve_path.chmod(0o640)
    new = b'SGLANG_ARGS="--speculative-algorithm DDTREE"\n'
    spec = {"path": str(serve_path), "sha256": hashlib.sha256(new).hexdigest(),
            "content_b64": base64.b64encode(new).decode()}  # fmt: skip
    facts = ("facts", {"paths": [], "package": "no-such-dist", "serve_path": str(serve_path)})
    plan = ("check_plan", {"run_id": "r", "package": "no-such-dist", "target_version": None,
                           "files": [], "serve": {**spec, "content_b64": None}})  # fmt: skip
    answer = agent(state, facts, plan)
    assert answer["results"][1]["data"]["files"] == {str(serve_path): "pending"}
    assert answer["results"][0]["data"]["serve"]["text"] == original.decode()

    backup = ("backup", {"deploy_id": "d1", "site_packages": str(site), "paths": [],
                         "serve_path": str(serve_path)})  # fmt: skip
    install = ("install", {"site_packages": str(site), "files": [], "serve": spec,
                           "deploy_id": "d1"})  # fmt: skip
    answer = agent(state, backup, install)
    assert answer["ok"], answer
    assert serve_path.read_bytes() == new
    assert serve_path.stat().st_mode & 0o777 == 0o640  # the operator's mode is kept

    answer = agent(state, facts, plan)  # now at the new flags: nothing to do
    assert answer["ok"] and answer["results"][1]["halt"], answer  # halt, ok: not a failure
    assert answer["results"][1]["code"] == "no_changes"

    answer = agent(state, ("restore", {"deploy_id": "d1", "serve_path": str(serve_path)}))
    assert answer["ok"], answer
    assert serve_path.read_bytes() == original
    assert answer["results"][0]["data"]["files"] == {str(serve_path): "restored"}


def test_agent_refuses_a_serve_content_that_does_not_match_its_hash(tmp_path):
    (tmp_path / "site").mkdir()
    spec = serve_spec(render_serve_file(str(tmp_path / "s.env"), "p@1", ["--a"], {}, [], {}))
    spec["content_b64"] = base64.b64encode(b"tampered").decode()
    install = ("install", {"site_packages": str(tmp_path / "site"), "files": [], "serve": spec})
    answer = agent(tmp_path / "state", install)
    assert answer["results"][0]["code"] == "result_mismatch"
    assert not (tmp_path / "s.env").exists()


def test_plan_and_status_show_what_changes_and_what_runs():
    from ddtree_deploy.stages.serve_file import diff_flags, summarize_flags

    dflash = ["--model-path", "/m", "--speculative-algorithm", "DFLASH", "--x", "1"]
    ddtree = ["--model-path", "/m", "--speculative-algorithm", "DDTREE",
              "--speculative-ddtree-budget", "8"]  # fmt: skip
    assert diff_flags(dflash, ddtree) == [
        "--speculative-algorithm DFLASH -> DDTREE",
        "+ --speculative-ddtree-budget 8",
        "- --x 1",
    ]
    assert summarize_flags(ddtree) == "DDTREE budget 8"
    assert summarize_flags(dflash) == "DFLASH"
    assert summarize_flags(["--model-path", "/m"]) == "no speculative decoding"
