"""The host side of the agent: stdlib-only modules, run by the HOST's python.

Every module here imports only the standard library and its siblings (relative imports),
so the set can travel as one payload and be imported on the host under `ddtree_agent`.
The controller imports `wire` (the protocol both sides share) and nothing else from here.
"""
