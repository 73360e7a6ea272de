"""Real sglang 0.5.23 servers on a hybrid (Gated DeltaNet) target: see conftest.py."""
