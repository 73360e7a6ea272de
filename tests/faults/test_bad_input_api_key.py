"""Bad [smoke] API-key settings are refused when the inventory loads: exit 2, one message
naming the file, the host and the key; no host is contacted (the address is TEST-NET-1,
which would time out, and the command ends in well under the connect timeout)."""

from __future__ import annotations

import time

import pytest

from tests.support import run_cli


@pytest.mark.parametrize(
    ("smoke", "key", "words"),
    [
        (
            'api_key_file = "/etc/sglang/key"\napi_key_env = "SGLANG_API_KEY"',
            "smoke",
            "give api_key_file or api_key_env, not both",
        ),
        (
            'api_key_file = "keys/sglang"',
            "smoke.api_key_file",
            "must be an absolute path on the host, got 'keys/sglang'",
        ),
        (
            'api_key_env = "SGLANG API KEY"',
            "smoke.api_key_env",
            "must be an environment variable name, got 'SGLANG API KEY'",
        ),
    ],
)
def test_bad_api_key_settings_exit_2_at_load(tmp_path, smoke, key, words):
    inventory = tmp_path / "inventory.toml"
    host = '[hosts.gpu1]\naddress = "192.0.2.1"\nconnect_timeout_s = 30\n'
    inventory.write_text(f"{host}[hosts.gpu1.smoke]\n{smoke}\n")
    started = time.monotonic()
    done = run_cli("push", "-H", "gpu1", "-p", "ddtree@1.0.0", "-i", str(inventory))
    assert done.returncode == 2, done.stderr
    assert f"{inventory}: host 'gpu1': key '{key}'" in done.stderr
    assert words in done.stderr
    assert time.monotonic() - started < 20  # refused at load: no connection was tried
