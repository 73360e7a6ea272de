"""`export --verify` with a server: the serving gate of the image's server against the base
image's, through the push's own verdicts (pipeline/image_gate.py), against a scripted
agent; and its settings (cli/export_gate.py). The same on real servers in containers:
test_verify.py (serving_full)."""

from __future__ import annotations

import pytest

from ddtree_deploy.cli.export_gate import read_gate_config, verify_gate_settings
from ddtree_deploy.errors import ConfigError
from ddtree_deploy.patchset import resolve_patchset
from ddtree_deploy.pipeline.image_gate import judge_image, measure_baseline
from ddtree_deploy.pipeline.image_serve import ServeCheck
from ddtree_deploy.stages import prepare_patchset
from tests.export.conftest import PATCHSETS
from tests.pipeline.fakehost import make_host, scene
from tests.pipeline.test_push_gate import gated, measurement
from tests.support import make_patchset

SERVE = ServeCheck(("--model-path", "/m", "--port", "31000"), 60.0, ("--model-path", "/m"))
PROMPTS = ({"input_ids": [1, 2, 3]}, {"input_ids": [4, 5]})


def container_scene(**script):
    """A HostRun on a scripted container host serving SERVE."""
    host = make_host(
        service=SERVE.service(),
        smoke=SERVE.smoke_spec(),
        container="ddtree-verify-x",
        container_runtime="docker",
    )
    return scene(host, **script)


def settings():
    prepared = prepare_patchset(resolve_patchset(PATCHSETS, "ddtree@1.1.0"))
    found = verify_gate_settings(prepared, "quick", None, serves=True)
    assert found is not None
    return found


def baseline_of(data):
    base = container_scene(gate_measure=[gated(data)])
    gate, why = measure_baseline(base.run, settings())
    assert gate is not None, why
    return gate, base


def test_the_same_server_passes_and_each_measurement_runs_where_the_push_runs_it():
    gate, base = baseline_of(measurement("baseline", verify_ct=0))
    image = container_scene(gate_measure=[gated(measurement("canary", 98.0, verify_ct=64))])
    judged, failed = judge_image(image.run, gate)
    assert failed is None
    names = {c["name"] for c in judged.details()["checks"]}
    assert {"tokens_per_s", "accept_length_ratio", "greedy_match", "error_rate"} <= names
    assert base.fake.sent == [["health"], ["gate_measure"]]  # waited for, then measured
    assert image.fake.sent == [["gate_measure"]]
    sent = [op for r in base.transport.requests for op in r.ops if op.op == "gate_measure"]
    assert sent[0].args["server_url"] == "http://127.0.0.1:31000" and not sent[0].args["save_as"]
    assert "baseline ok" in base.stages() and "canary ok" in image.stages()


def test_other_greedy_output_fails_the_gate():
    """The negative control: the image's server changed the output (the push's
    greedy_match check says so, prompt and token)."""
    gate, _ = baseline_of(measurement("baseline"))
    image = container_scene(
        gate_measure=[gated(measurement("canary", outputs=[[7, 8, 9], [10, 12]]))]
    )
    _, failed = judge_image(image.run, gate)
    assert failed is not None and "gate.greedy_match" in failed, failed


def test_a_much_slower_server_fails_after_its_remeasures():
    gate, _ = baseline_of(measurement("baseline", 100.0))
    slow = [gated(measurement(p, 30.0)) for p in ("canary", "retry-2", "retry-3")]
    image = container_scene(gate_measure=slow)
    judged, failed = judge_image(image.run, gate)
    assert failed is not None and "gate.tokens_per_s" in failed, failed
    assert len(image.fake.sent) == 3  # the first measurement, then `retries` (2) more
    assert "replay 3" in next(c for c in judged.checks if c.name == "tokens_per_s").detail


def test_an_unusable_base_is_no_baseline():
    base = container_scene(gate_measure=[gated(measurement("baseline", errors=2))])
    gate, why = measure_baseline(base.run, settings())
    assert gate is None and "no usable baseline" in why and "base image" in why


def test_a_base_server_that_never_answers_is_no_baseline():
    from ddtree_deploy.agent import OpResult

    down = OpResult(op="health", ok=False, error="not healthy after 60 s", duration_s=60)
    base = container_scene(health=[down])
    gate, why = measure_baseline(base.run, settings())
    assert gate is None and "not healthy after 60 s" in why
    assert base.fake.sent == [["health"]]  # nothing measured


def test_the_gate_settings_default_to_quick_with_the_patchsets_prompts():
    prepared = prepare_patchset(resolve_patchset(PATCHSETS, "ddtree@1.1.0"))
    found = verify_gate_settings(prepared, "quick", None, serves=True)
    assert found is not None and found.mode == "quick" and not found.loads
    assert found.prompts == prepared.gate_prompts and found.prompts  # the [lossless] prompts
    assert found.thresholds.max_tokens_per_s_regression == 0.05
    assert verify_gate_settings(prepared, "off", None, serves=True) is None
    assert verify_gate_settings(prepared, "quick", None, serves=False) is None


def test_a_gate_config_file_goes_over_the_patchsets(tmp_path):
    (tmp_path / "prompts.jsonl").write_text('{"text": "hi"}\n')
    config = tmp_path / "gate.toml"
    config.write_text(
        '[gate]\nmax_tokens_per_s_regression = 0.5\nprompts = "prompts.jsonl"\nrounds = 2\n'
    )
    prepared = prepare_patchset(resolve_patchset(PATCHSETS, "ddtree@1.1.0"))
    found = verify_gate_settings(prepared, "full", config, serves=True)
    assert found is not None and found.mode == "full" and found.rounds == 2
    assert found.thresholds.max_tokens_per_s_regression == 0.5
    assert found.prompts == ({"text": "hi"},)


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ("[gate]\nmax_tokens_per_s_regresion = 0.5\n", "unknown key 'gate.max_tokens_per_s"),
        ("[gate]\nrounds = 0\n", "key 'gate.rounds'"),
        ('[gate]\nprompts = "none.jsonl"\n', "key 'gate.prompts'"),
        ("[defaults.gate]\nrounds = 2\n", "expected one [gate] table"),
        ("[gate\n", "--verify-gate-config"),
    ],
)
def test_a_bad_gate_config_is_bad_input(tmp_path, text, said):
    config = tmp_path / "gate.toml"
    config.write_text(text)
    with pytest.raises(ConfigError, match="--verify-gate-config") as caught:
        read_gate_config(config)
    assert said in str(caught.value)


def test_a_gate_without_prompts_is_refused(tmp_path):
    """A patchset with neither [gate] nor [lossless] prompts and no config: exit 2, never
    a gate that replays nothing."""
    patchsets = make_patchset(tmp_path)
    prepared = prepare_patchset(resolve_patchset(patchsets, "ddtree@1.0.0"))
    assert not prepared.gate_prompts
    with pytest.raises(ConfigError, match="no prompts"):
        verify_gate_settings(prepared, "quick", None, serves=True)
    assert verify_gate_settings(prepared, "off", None, serves=True) is None


def test_the_base_server_is_the_operators_args_without_the_patchsets_flags():
    from ddtree_deploy.cli.export_verify import serve_check

    prepared = prepare_patchset(resolve_patchset(PATCHSETS, "ddtree@1.1.0"))
    given = "--model-path /m --speculative-algorithm DFLASH --port 31000"
    serve = serve_check(prepared, given, 60.0)
    assert serve is not None
    assert serve.of_base().args == ("--model-path", "/m", "--speculative-algorithm", "DFLASH",
                                    "--port", "31000")  # fmt: skip
    assert "DDTREE" in serve.args and "DFLASH" not in serve.args
    assert serve.of_base().url == serve.url


def test_people_see_both_measurements_and_every_check():
    """stderr: the base's and the image's measurement lines (ok events of baseline and
    canary), the checks (info) and failures; no other ok line."""
    import io

    from rich.console import Console

    from ddtree_deploy.cli.context import RunContext
    from ddtree_deploy.cli.export_verify import progress

    gate, base = baseline_of(measurement("baseline"))
    image = container_scene(gate_measure=[gated(measurement("canary", outputs=[[1], [2]]))])
    judge_image(image.run, gate)
    said = io.StringIO()
    sink = progress(RunContext(Console(file=said, width=200)))
    for event in [*base.events, *image.events]:
        sink(event)
    lines = said.getvalue().splitlines()
    assert any(line.startswith("verify baseline: DFLASH: 6 requests") for line in lines), lines
    assert any(line.startswith("verify canary: gate.greedy_match FAILED") for line in lines)
    assert any(line.startswith("verify canary: gate failed: gate.greedy_match") for line in lines)
    assert not any(line.startswith("verify health") for line in lines)  # its ok: not shown
