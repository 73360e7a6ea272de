"""The keepalive rule (transport/alive.py, pure): which hop is named, when it is news, when
it is lost. The threads around it are proven on real sshd hosts in
tests/faults/test_network_cut.py."""

from __future__ import annotations

from ddtree_deploy.transport.alive import HopSilence, judge_silence


def _hop(name: str, silent_s: float, interval_s: float = 2.0, count: int = 3) -> HopSilence:
    return HopSilence(name, silent_s, interval_s, count)


def test_one_interval_of_silence_is_no_news():
    # a healthy hop is asked one interval after its last answer: up to ~1 interval silent
    assert judge_silence([_hop("host0", 0.0), _hop("host0", 3.9)]) is None


def test_two_intervals_are_news_and_count_intervals_are_lost():
    news = judge_silence([_hop("host0", 4.2)])
    assert news is not None and (news.intervals, news.lost) == (2, False)
    assert news.message == "no answer from host0 for 4 s"
    lost = judge_silence([_hop("host0", 6.0)])
    assert lost is not None and lost.lost
    assert lost.message == (
        "no answer from host0 for 6 s (keepalive_s 2 × keepalive_count 3): given up"
    )


def test_a_count_of_one_gives_up_after_one_interval():
    verdict = judge_silence([_hop("host0", 2.0, count=1)])
    assert verdict is not None and verdict.lost


def test_the_silent_hop_nearest_the_controller_is_named():
    hops = [_hop("jump host b (root@b:22)", 6.5), _hop("host0", 6.5)]
    verdict = judge_silence(hops)
    assert verdict is not None and verdict.hop.name.startswith("jump host b")
    # a silent host behind an answering jump host is still found
    verdict = judge_silence([_hop("jump host b (root@b:22)", 1.0), _hop("host0", 6.5)])
    assert verdict is not None and verdict.hop.name == "host0" and verdict.lost


def test_a_hop_with_keepalive_off_is_never_judged():
    assert judge_silence([_hop("host0", 1e6, interval_s=0)]) is None
