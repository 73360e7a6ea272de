# ddtree-deploy: `make demo` runs the real job on local sandbox hosts; `make test` runs the tests.
PYTHON ?= python3
SANDBOX ?= /tmp/ddtree-deploy-sandbox
# pyinfra, the bench peer, needs paramiko<5: it gets its own venv (bench/requirements-pyinfra.txt)
PYINFRA_VENV ?= $(CURDIR)/bench/.pyinfra-venv
export DDTREE_DEPLOY_INVENTORY ?= $(SANDBOX)/inventory.toml

.PHONY: install install-py coverage deps demo demo-down test test-fast test-serving lint bench soak faults clean gpu-check

install: deps install-py  ## openssh-server, then the tool, its test deps and the sandbox

install-py:  ## the tool, its test deps and the test sandbox (sandbox/) into the current python
	$(PYTHON) -m pip install -q -e '.[test]' -e ./sandbox

deps:  ## openssh-server, sudo (become tests), iptables (silent-cut tests), docker.io + debootstrap (systemd/container hosts) (root, Debian)
	@{ [ -x /usr/sbin/sshd ] && [ -x /usr/bin/sudo ] && command -v iptables >/dev/null && \
		[ -x /usr/sbin/dockerd ] && [ -x /usr/sbin/debootstrap ]; } || { apt-get update -qq && \
		DEBIAN_FRONTEND=noninteractive apt-get install -y -qq openssh-server sudo iptables \
		docker.io debootstrap >/dev/null; }

demo: install  ## sandbox hosts (real sshd), then push -> status -> broken push (auto rollback) -> rollback
	$(PYTHON) -m ddtree_sandbox demo --workdir $(SANDBOX)

demo-down:
	$(PYTHON) -m ddtree_sandbox down --workdir $(SANDBOX)

test: install lint  ## the whole suite but serving_full: unit tests, real-sshd hosts, real sglang 0.5.13.post1 and 0.5.23 servers
	$(PYTHON) -m pytest -q -m "not slow and not serving_full" --durations=30

test-serving: install  ## DDTree on real sglang servers (0.5.13.post1 and 0.5.23, the hybrid GDN target too): every control, serving_full included
	$(PYTHON) -m pytest -q tests/serving tests/serving_v2 tests/serving_hybrid tests/serving_tp tests/sandbox/test_cpu_fixture.py \
		tests/targets/test_target_hosts.py::test_push_ddtree_200_to_real_sglang_0523 \
		tests/export/test_verify.py

test-fast: install-py  ## unit tests, the agent's ops on a temp dir and the pipeline's decisions: no root, no sshd
	$(PYTHON) -m pytest -q -m "not slow and not hosts"

gpu-check:  ## SGLang 0.5.23's tree kernels vs DDTree on CUDA + timings (needs torch, triton, sglang 0.5.23; < 10 min)
	$(PYTHON) bench/gpu_check.py $(GPU_CHECK_ARGS)

coverage: install-py  ## line coverage of agent/ and pipeline/ under test-fast (MARKS="not slow" for make test's set)
	rm -rf .coverage-data && mkdir -p .coverage-data
	$(PYTHON) -m coverage run -m pytest -q -m "$(or $(MARKS),not slow and not hosts)"
	$(PYTHON) -m coverage combine -q
	$(PYTHON) -m coverage report

lint:  ## ruff, the layering check (python -m ddtree_deploy.devtools.deps) and mypy
	$(PYTHON) -m ruff check .
	$(PYTHON) -m ruff format --check ddtree_deploy sandbox tests
	$(PYTHON) -m ddtree_deploy.devtools.deps
	$(PYTHON) -m mypy ddtree_deploy

clean: demo-down
	rm -rf $(SANDBOX) .pytest_cache

bench: install  ## interleaved benchmarks vs the floor/Ansible/pyinfra/Fabric at 0/25/100 ms, 1-64 hosts, controller-only 1-1000 hosts, import gate, time to a verified server on real sglang (root, ~30-45 min): docs/benchmarks.md
	$(PYTHON) -m pip install -q -e '.[bench]'
	[ -x $(PYINFRA_VENV)/bin/python ] || $(PYTHON) -m venv $(PYINFRA_VENV)
	$(PYINFRA_VENV)/bin/pip install -q -r bench/requirements-pyinfra.txt
	BENCH_PYINFRA_VENV=$(PYINFRA_VENV) $(PYTHON) bench/run_benchmarks.py $(BENCH_ARGS)

faults: install  ## the whole fault matrix + crash/bad-input/security tests (root, ~15 min): docs/reliability.md
	$(PYTHON) -m tests.faults.report

soak: install  ## 30 push/rollback cycles on 4 sandbox hosts, checking for leaks (root, ~15 min)
	$(PYTHON) -m pytest -q -p no:cacheprovider tests/faults/test_soak.py
