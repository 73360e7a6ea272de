"""The tensor-parallel real-server sandbox the tests in tests/serving_tp share (package scope).

One sshd host running a REAL sglang 0.5.23 server at ``--tp-size 2`` (two CPU ranks, one core
each, gloo all-reduce; serving.TP_ENV) on tiny models with a 62-token vocabulary, so the LM
head's two shards both hold real tokens (ids 0-31 and 32-61; at the default 32 the padded
vocabulary puts every real token on rank 0). The host serves the target plain, so a push's
lossless gate records its references from the host's own tp-2 plain server.
"""

from __future__ import annotations

import pytest

from tests.serving.serving import PlainServing
from tests.serving_hybrid.conftest import start_plain_0523_host

VOCAB = {"vocab_size": 62}
# version -> (prompts, new tokens) of its lossless gate here (2.2.0 is refused at start).
TRIMMED = {"2.2.0": (1, 4), "2.2.1": (8, 32)}


@pytest.fixture(scope="package")
def serving_tp(tmp_path_factory):
    workdir = tmp_path_factory.mktemp("serving-tp")
    sandbox, patchsets = start_plain_0523_host(workdir, TRIMMED, tp_size=2, model_recipe=VOCAB)
    state = PlainServing.record(sandbox, patchsets, workdir)
    yield state
    sandbox.stop()
