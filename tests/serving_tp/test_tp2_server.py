"""ddtree 2.2.1 at ``--tp-size 2`` on a REAL sglang 0.5.23 server (CPU, fp32, two ranks).

`-p ddtree` picks 2.2.1 for the host; its push passes every gate, the lossless one included
(DDTREE's greedy tokens equal the host's own tp-2 plain server's, 8/8 one at a time and in
flight), the server reports DDTREE at tp 2, and a rollback brings the plain server back. The
control: 2.2.0, which builds trees from one rank's logits, is refused at start naming
``--tp-size 2`` (rolled back, exit 1). The builder's own proof (2 and 4 gloo ranks build the
one-rank tree) is tests/ddtree/test_ddtree_tp.py.
"""

from __future__ import annotations

import pytest

from ddtree_sandbox.hosts import SERVICE_PORT
from tests.serving.serving import (
    accept_length,
    checks,
    get_json,
    listener_cmdline,
    server_suites,
    summary,
)

pytestmark = [pytest.mark.hosts, pytest.mark.serving_full]

LOSSLESS = ("reference", "lossless_sequential", "lossless_concurrent", "acceptance")
SLOW = {"timeout_s": 600.0}  # per request: two ranks on two busy cores


def test_p_ddtree_pushes_221_and_serves_losslessly_at_tp_2(serving_tp):
    pushed = serving_tp.cli("push", "-H", "host0", "-p", "ddtree", "--json", budget=8, **SLOW)
    assert pushed.returncode == 0, pushed.stderr[-4000:]
    assert "ddtree@2.2.1" in pushed.stdout
    found = checks(server_suites(pushed.stdout)["host0"])
    assert all(found[c]["passed"] for c in LOSSLESS), found
    assert "8/8" in found["lossless_sequential"]["detail"].splitlines()[0], found
    assert "8/8" in found["lossless_concurrent"]["detail"].splitlines()[0], found
    host = serving_tp.host("host0")
    info = get_json(host, "/server_info")
    assert (info["speculative_algorithm"], info["tp_size"]) == ("DDTREE", 2), info
    assert "--tp-size 2" in listener_cmdline(host.address, SERVICE_PORT)
    print(f"ddtree 2.2.1 budget 8 at tp 2: {found['acceptance']['detail']}")
    assert accept_length(found["acceptance"]) >= 1.0
    back = serving_tp.cli("rollback", "-H", "host0", "--json")
    assert back.returncode == 0, back.stderr[-3000:]
    serving_tp.assert_pristine("host0")


def test_control_220_is_refused_at_tp_2_names_it_and_rolls_back(serving_tp):
    pushed = serving_tp.cli("push", "-H", "host0", "-p", "ddtree@2.2.0", "--json")
    if pushed.returncode == 0:  # the refusal is gone: put the host back
        serving_tp.cli("rollback", "-H", "host0")
    assert pushed.returncode == 1, pushed.stderr[-4000:]
    message = summary(pushed.stdout)["host0"]["message"]
    assert "rolled back" in message and "--tp-size 2" in message, message
    serving_tp.assert_pristine("host0")
