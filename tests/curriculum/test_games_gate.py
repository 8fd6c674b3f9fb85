"""The games gate's decision on paired held-out results (``ratchet.curriculum.gate.decide``): the
engine's sign-flip test where the pairs allow one, the point estimates where they cannot, calls to
solve when best h ties, and never a version that solves fewer."""

from __future__ import annotations

from ratchet.curriculum.gate import decide, summary


def rows(*cells: tuple[float, int | None]) -> dict[str, dict]:
    """Per game#seed: (best h, calls to solve or None)."""
    return {f"G-v0#{i}": {"best_h": h, "solved": h >= 1.0, "calls_to_solve": c, "calls": c or 12}
            for i, (h, c) in enumerate(cells)}


def test_a_gain_on_every_pair_of_six_passes_the_paired_test() -> None:
    before = rows(*[(0.5, None)] * 6)
    after = rows(*[(0.6, None)] * 6)
    d = decide(before, after)
    assert d["promote"] and d["test"]["basis"] == "sign_flip" and d["test"]["p"] < 0.05
    assert "mean best h 0.500 -> 0.600 over 6 pairs, sign-flip p" in d["reason"]


def test_a_mixed_change_is_not_better_even_with_a_higher_mean() -> None:
    before = rows(*[(0.5, None)] * 6)
    after = rows((0.9, None), (0.9, None), (0.45, None), (0.45, None), (0.45, None), (0.45, None))
    d = decide(before, after)
    assert not d["promote"] and d["test"]["mean_delta"] > 0 and d["test"]["p"] >= 0.05


def test_few_pairs_are_decided_by_the_point_estimates_and_say_so() -> None:
    d = decide(rows((0.5, None), (0.5, None)), rows((0.6, None), (0.5, None)))
    assert d["promote"] and d["test"]["basis"] == "point estimates" and "2 pairs cannot reach p < 0.05" in d["reason"]
    worse = decide(rows((0.5, None), (0.5, None)), rows((0.4, None), (0.5, None)))
    assert not worse["promote"]


def test_solving_fewer_is_refused_whatever_the_mean() -> None:
    d = decide(rows((1.0, 3), (0.2, None)), rows((0.99, None), (0.9, None)))
    assert not d["promote"] and "solves 0 of 2 held-out searches, 1 fewer" in d["reason"]


def test_ties_on_best_h_are_decided_by_calls_to_solve() -> None:
    faster = decide(rows((1.0, 8), (1.0, 6)), rows((1.0, 4), (1.0, 6)))
    assert faster["promote"] and "calls to solve 7.0 -> 5.0" in faster["reason"]
    same = decide(rows((0.5, None)), rows((0.5, None)))
    assert not same["promote"] and "no search both solved" in same["reason"]


def test_the_summary_has_the_solve_rate_with_its_interval() -> None:
    s = summary(rows((1.0, 4), (1.0, 6), (0.5, None), (0.25, None)))
    assert s["solved"] == 2 and s["solve_rate"] == 0.5 and s["mean_calls_to_solve"] == 5.0
    assert 0.0 < s["wilson95"][0] < 0.5 < s["wilson95"][1] < 1.0 and s["mean_best_h"] == 0.6875
