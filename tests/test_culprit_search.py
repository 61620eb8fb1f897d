"""Issue 36 item 5: the search for the smallest set of culprit units (pure: the probe is a function here).

Each probe stands for a whole program run with some suspects' current binaries and the others' good ones;
the tests hold the search to its guarantee (every culprit set probed directly and failing, 1-minimal by
the probes) and to its bound (one culprit among n: at most ceil(log2 n) + 1 probes besides the endpoints).
"""
from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pypto_build.culprits.search import Probe, Search, find_culprits


def names(n: int) -> list[str]:
    return [f"compile:aiv/k{i}" for i in range(n)]


def groups_rule(groups):
    """A monotone oracle: the mix fails iff some hidden group is wholly in it."""
    return lambda mix: any(set(g) <= mix for g in groups)


def counted(rule):
    calls: list[frozenset[str]] = []

    def probe(mix: frozenset[str]) -> bool:
        assert isinstance(mix, frozenset)
        calls.append(mix)
        return rule(mix)
    return probe, calls


def assert_guarantee(search: Search, suspects, current_known: bool = False) -> None:
    """The culprits failed when probed directly (or are the known all-current endpoint), and the mix without
    any one of them was probed and passed (or is the all-good endpoint)."""
    seen = {frozenset(p.current): p.fails for p in search.probes}
    culprits = frozenset(search.culprits)
    assert search.verdict == "culprits" and culprits
    assert seen.get(culprits) is True or (current_known and culprits == frozenset(suspects))
    for member in culprits:
        rest = culprits - {member}
        assert not rest or seen.get(rest) is False, f"without {member}: {seen.get(rest)}"
    assert list(search.culprits) == [s for s in suspects if s in culprits]      # in the suspects' order


def test_one_culprit_within_the_bound_for_every_n_and_position():
    """The bound, proved exhaustively for n = 1..300: ceil(log2 n) + 1 probes besides the two endpoints
    (both known here; probed, they add exactly two: checked for n <= 40)."""
    worst = {}
    for n in range(1, 301):
        suspects = names(n)
        bound = math.ceil(math.log2(n)) + 1
        for position, culprit in enumerate(suspects):
            search = find_culprits(suspects, lambda mix: culprit in mix, current_fails=True, good_fails=False)
            assert search.culprits == (culprit,) and len(search.probes) <= bound, (n, position, search.probes)
            assert n == 1 or search.probes[-1] == Probe((culprit,), True, search.probes[-1].why), (n, position)
            worst[n] = max(worst.get(n, 0), len(search.probes))
            if n <= 40:
                probed = find_culprits(suspects, lambda mix: culprit in mix)
                assert [p.why for p in probed.probes[:2]] == ["all current", "all good"]
                assert probed.probes[2:] == search.probes and probed.culprits == search.culprits
                assert_guarantee(probed, suspects)
    assert worst[1] == 0 and worst[2] == 2 and worst[300] == math.ceil(math.log2(300)) + 1


def test_the_search_is_deterministic_and_names_each_probe():
    suspects = names(6)
    first = find_culprits(suspects, groups_rule([["compile:aiv/k4"]]))
    assert first == find_culprits(suspects, groups_rule([["compile:aiv/k4"]]))
    assert [(p.current, p.fails, p.why) for p in first.probes] == [
        (tuple(suspects), True, "all current"),
        ((), False, "all good"),
        (tuple(suspects[:3]), False, "half 1/2 of 6"),
        (tuple(suspects[3:5]), True, "half 1/2 of 3"),
        (tuple(suspects[3:4]), False, "half 1/2 of 2"),
        (("compile:aiv/k4",), True, "verify"),
    ]


@settings(max_examples=300, deadline=None)
@given(st.data())
def test_monotone_hidden_groups_yield_one_of_them(data):
    """Under "fails iff some hidden group is wholly in the mix", a 1-minimal failing mix is a hidden group:
    the search returns one, and exactly the group when there is one."""
    n = data.draw(st.integers(1, 40), label="n")
    suspects = names(n)
    groups = data.draw(st.lists(st.lists(st.sampled_from(suspects), min_size=1, max_size=4, unique=True),
                                min_size=1, max_size=3), label="groups")
    probe, calls = counted(groups_rule(groups))
    search = find_culprits(suspects, probe)
    assert_guarantee(search, suspects)
    assert set(search.culprits) in [set(g) for g in groups]
    if len(groups) == 1:
        assert set(search.culprits) == set(groups[0])
    assert len(calls) == len(set(calls)) == len(search.probes)        # no mix run twice


@pytest.mark.parametrize("n", [2, 3, 7, 16, 45])
def test_two_culprits_that_fail_only_together_are_found_together(n):
    """Every pair, in particular the pairs split by the first halving (both halves pass)."""
    suspects = names(n)
    for i in range(n):
        for j in range(i + 1, n):
            pair = [suspects[i], suspects[j]]
            search = find_culprits(suspects, groups_rule([pair]), current_fails=True, good_fails=False)
            assert search.culprits == tuple(pair), (n, i, j)
            assert_guarantee(search, suspects, current_known=True)
            assert len(search.probes) <= 2 * n * math.ceil(math.log2(n)) + 4


def test_a_pair_split_by_the_halving_falls_back_to_ddmin_after_the_verification():
    suspects = names(8)
    search = find_culprits(suspects, groups_rule([[suspects[1], suspects[6]]]))
    whys = [p.why for p in search.probes]
    verify = whys.index("verify")
    assert search.probes[verify].fails is False
    assert all(w.startswith("ddmin") for w in whys[verify + 1:]) and "ddmin complement 1/4 of 8" in whys
    assert search.culprits == (suspects[1], suspects[6])


def test_the_fallback_starts_from_the_last_mix_that_failed():
    """A pair in the second quarter: the halving probes it whole (it fails), then breaks on its halves; ddmin
    narrows that pair, which failed when probed, and needs no new run (all its sub-mixes are known)."""
    suspects = names(8)
    search = find_culprits(suspects, groups_rule([suspects[4:6]]), current_fails=True, good_fails=False)
    assert [(p.current, p.fails, p.why) for p in search.probes] == [
        (tuple(suspects[:4]), False, "half 1/2 of 8"),
        (tuple(suspects[4:6]), True, "half 1/2 of 4"),
        (tuple(suspects[4:5]), False, "half 1/2 of 2"),
        (tuple(suspects[5:6]), False, "verify"),
    ]
    assert search.culprits == tuple(suspects[4:6])


@settings(max_examples=300, deadline=None)
@given(st.data())
def test_a_non_monotone_oracle_still_yields_a_directly_verified_minimal_set(data):
    """Any answers at all (all-current fails, all-good passes): the result is still a mix that failed when
    probed, and 1-minimal by the probes."""
    n = data.draw(st.integers(1, 24), label="n")
    suspects = names(n)
    answers: dict[frozenset[str], bool] = {frozenset(suspects): True, frozenset(): False}

    def probe(mix: frozenset[str]) -> bool:
        assert mix not in answers or mix in (frozenset(suspects), frozenset()), "mix probed twice"
        if mix not in answers:
            answers[mix] = data.draw(st.booleans(), label=f"{sorted(mix)}")
        return answers[mix]
    search = find_culprits(suspects, probe, current_fails=data.draw(st.sampled_from([True, None])))
    assert_guarantee(search, suspects, current_known=True)
    assert all(answers[frozenset(p.current)] is p.fails for p in search.probes)


def test_all_current_passing_is_agree_with_no_further_probe():
    probe, calls = counted(lambda mix: False)
    search = find_culprits(names(5), probe)
    assert search == Search((), (Probe(tuple(names(5)), False, "all current"),), "agree")
    assert calls == [frozenset(names(5))]
    probe, calls = counted(lambda mix: True)
    assert find_culprits(names(5), probe, current_fails=False) == Search((), (), "agree")
    assert calls == []


def test_all_good_failing_is_good_fails():
    probe, calls = counted(lambda mix: True)
    search = find_culprits(names(5), probe)
    assert search.verdict == "good fails" and search.culprits == ()
    assert [(p.why, p.fails) for p in search.probes] == [("all current", True), ("all good", True)]
    assert find_culprits(names(5), probe, good_fails=True) == Search((), (), "good fails")
    assert len(calls) == 2


def test_known_endpoints_are_not_probed_again():
    suspects = names(9)
    probe, calls = counted(groups_rule([[suspects[7]]]))
    search = find_culprits(suspects, probe, current_fails=True, good_fails=False)
    assert search.culprits == (suspects[7],)
    assert frozenset(suspects) not in calls and frozenset() not in calls
    single = find_culprits(suspects[:1], lambda mix: pytest.fail("no probe needed"),
                           current_fails=True, good_fails=False)
    assert single == Search((suspects[0],), (), "culprits")


def test_no_suspects_but_a_failure_blames_nothing():
    assert find_culprits([], lambda mix: True).verdict == "no suspects"
    assert find_culprits([], lambda mix: False).verdict == "agree"


def test_on_probe_sees_every_probe_in_order_as_it_is_made():
    suspects = names(13)
    shown: list[tuple[Probe, int]] = []
    probe, calls = counted(groups_rule([[suspects[2], suspects[11]]]))
    search = find_culprits(suspects, probe, on_probe=lambda p: shown.append((p, len(calls))))
    assert [p for p, _ in shown] == list(search.probes)
    assert [made for _, made in shown] == list(range(1, len(calls) + 1))   # each shown right after its run


def test_a_raising_probe_propagates_after_showing_the_runs_before_it():
    suspects = names(10)
    shown: list[Probe] = []

    def probe(mix: frozenset[str]) -> bool:
        if len(shown) == 3:
            raise KeyboardInterrupt
        return suspects[9] in mix
    with pytest.raises(KeyboardInterrupt):
        find_culprits(suspects, probe, on_probe=shown.append)
    assert [p.why for p in shown] == ["all current", "all good", "half 1/2 of 10"]


def test_suspects_named_twice_are_refused():
    with pytest.raises(ValueError, match="compile:aiv/k1"):
        find_culprits(["compile:aiv/k1", "compile:aiv/k1"], lambda mix: True)
