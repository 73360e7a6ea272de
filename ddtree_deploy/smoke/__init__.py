"""Smoke suite scripts, shipped in the wheel as text and run by each HOST's python.

The product never imports these modules: ``stages.load_smoke_sources`` reads them with
``importlib.resources`` and the agent runs each suite beside the ``_*.py`` helpers. Each one
stays standalone (stdlib, plus torch/sglang where the suite needs them).
"""
