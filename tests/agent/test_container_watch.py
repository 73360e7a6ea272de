"""The container watchdog's verdicts (wire_container.died_while_starting) from two inspects:
right after our restart, and when the container's agent died during the health wait. The
end-to-end run (a container restarted by its policy, on the docker stand-in) is
tests/faults/test_container_watchdog.py."""

from __future__ import annotations

import pytest

from ddtree_deploy.agent.host.wire_container import (
    ContainerFacts,
    ContainerSpec,
    died_while_starting,
    read_inspect,
)

SPEC = ContainerSpec(runtime="docker", name="sg0", argv=["docker", "exec", "-i", "sg0"])
STARTED = ContainerFacts(
    name="sg0", runtime="docker", id="a" * 64, image="img", image_id="sha256:1",
    running=True, pid=100, started_at="2026-12-01T10:00:00Z", restart_count=0,
)  # fmt: skip


@pytest.mark.parametrize(
    ("now", "said"),
    [
        (None, "container 'sg0' is gone, 3.2s after the restart"),
        (STARTED.replace(id="b" * 64), "was recreated (id bbbbbbbbbbbb)"),
        (STARTED.replace(running=False, pid=None, exit_code=137),
         "container 'sg0' exited while starting (exit code 137), 3.2s after the restart"),
        (STARTED.replace(restart_count=2),
         "restarted by its restart policy while starting (a crash: RestartCount 0 -> 2)"),
        (STARTED.replace(pid=200, started_at="2026-12-01T10:00:04Z"),
         "restarted by its restart policy"),  # podman without a count: a new start
    ],
)  # fmt: skip
def test_a_container_that_stopped_or_restarted_is_named(now, said):
    why = died_while_starting(STARTED, now, 3.2)
    assert why is not None and said in why, why


def test_a_container_still_running_as_started_is_no_verdict():
    """The control: the agent died of something else (a lost agent, not a crash)."""
    assert died_while_starting(STARTED, STARTED.replace(), 3.2) is None


def test_inspect_reads_the_restart_count_and_the_exit_code_of_a_stopped_container():
    found = [{"Id": "c" * 64, "Config": {"Image": "img"}, "Image": "sha256:2",
              "State": {"Running": False, "Pid": 0, "ExitCode": 1, "StartedAt": "t"},
              "RestartCount": 3}]  # fmt: skip
    facts = read_inspect(SPEC, found)
    assert (facts.running, facts.exit_code, facts.restart_count) == (False, 1, 3)
    running = [dict(found[0], State={"Running": True, "Pid": 7, "ExitCode": 0})]
    assert read_inspect(SPEC, running).exit_code is None  # no exit while it runs


def test_inspect_says_when_the_restart_policy_is_restarting_it():
    state = {"Running": True, "Restarting": True, "Pid": 0, "StartedAt": "t"}
    found = [{"Id": "c" * 64, "Config": {"Image": "img"}, "Image": "sha256:2",
              "RestartCount": 1, "State": state}]  # fmt: skip
    assert read_inspect(SPEC, found).restarting is True
    settled = [dict(found[0], State={"Running": True, "Restarting": False, "Pid": 7})]
    facts = read_inspect(SPEC, settled)
    assert facts.restarting is None and "restarting" not in facts.to_dict()
