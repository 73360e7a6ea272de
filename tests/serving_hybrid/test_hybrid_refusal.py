"""A hybrid target on a REAL sglang 0.5.23 server: served right without speculation (equal to
transformers' full-recompute greedy), and ddtree 2.1.3 refused on it at start (2.1.0-2.1.2
served it wrong: they verified the tree's GDN states as a chain).

Host test (conftest.py): one sshd host serving the tiny Qwen3.5-text target plain.
"""

from __future__ import annotations

import json
import subprocess
import urllib.request

import pytest

from ddtree_sandbox.hosts import SERVICE_PORT
from tests.serving.serving import get_json, summary

pytestmark = pytest.mark.hosts

# The lossless gate's first prompts (patchset [lossless]); few tokens: ~0.2 s a token here.
PROMPTS = [[11, 9, 15, 5, 4, 8, 11, 5, 11], [4, 12, 13, 7, 10, 8, 11, 10], [12, 4, 11]]
TOKENS = 12

# transformers' greedy by full recompute (its cached generate() is no reference: chunked and
# recurrent GDN round differently), run by the sandbox base env's python.
HF_GREEDY = """
import json, sys, torch
from transformers import AutoModelForCausalLM
model = AutoModelForCausalLM.from_pretrained(sys.argv[1], dtype=torch.float32).eval()
eos, out = model.config.eos_token_id, []
with torch.no_grad():
    for prompt in json.loads(sys.argv[2]):
        ids = list(prompt)
        for _ in range(int(sys.argv[3])):
            ids.append(int(model(torch.tensor([ids])).logits[0, -1].argmax()))
            if ids[-1] == eos:
                break
        out.append(ids[len(prompt):])
print(json.dumps(out))
"""


def generate(host, prompt: list[int], tokens: int) -> list[int]:
    body = {"input_ids": prompt, "sampling_params": {"max_new_tokens": tokens, "temperature": 0}}
    request = urllib.request.Request(
        f"http://{host.address}:{SERVICE_PORT}/generate",
        json.dumps(body).encode(),
        {"Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=300) as response:
        return [int(t) for t in json.loads(response.read())["output_ids"]]


def test_plain_hybrid_server_equals_transformers_full_recompute_greedy(serving_hybrid):
    sandbox = serving_hybrid.sandbox
    host = serving_hybrid.host("host0")
    info = get_json(host, "/server_info")
    assert info["version"] == "0.5.23" and info["speculative_algorithm"] is None
    served = [generate(host, p, TOKENS) for p in PROMPTS]
    done = subprocess.run(
        [str(sandbox.base_env.python), "-c", HF_GREEDY, str(sandbox.models.hybrid),
         json.dumps(PROMPTS), str(TOKENS)],
        capture_output=True, text=True, timeout=600, check=True,
    )  # fmt: skip
    assert served == json.loads(done.stdout.splitlines()[-1])


def test_push_213_to_a_hybrid_host_fails_at_start_names_it_and_rolls_back(serving_hybrid):
    """ddtree 2.1.3 (2.1.2 + the hybrid refusal): the DDTREE worker refuses the GDN target at
    start, the service exits, health fails, the push exits 1 and the host is pristine again."""
    pushed = serving_hybrid.cli("push", "-H", "host0", "-p", "ddtree@2.1.3", "--json")
    if pushed.returncode == 0:  # the refusal is gone: put the host back for the next tests
        serving_hybrid.cli("rollback", "-H", "host0")
    assert pushed.returncode == 1, pushed.stderr[-4000:]
    message = summary(pushed.stdout)["host0"]["message"]
    assert "rolled back" in message, message
    # the push's own message says why: the refusal's words, quoted from the server's log
    assert "hybrid linear-attention/Mamba target" in message, message
    log = (serving_hybrid.host("host0").service_dir_on_disk / "server.log").read_text()
    assert "hybrid linear-attention/Mamba target (GDN (Qwen3_5TextConfig))" in log, log[-3000:]
    serving_hybrid.assert_pristine("host0")
