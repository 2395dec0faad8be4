"""The published sizing methods, on small histories worked out by hand."""

from __future__ import annotations

import numpy as np
import pytest

from panda_predictor.core.replay.peers import PEER_METHODS, peer_requests

INF = np.inf


def _history(uses, x=None, *, cap=INF, query_x=None):
    """Return the columns of past jobs of key "a" (all known by t=13) and one job
    submitted at t=100, whose own use (0) no method may see."""
    n = len(uses)
    columns = {
        "key": ["a"] * (n + 1),
        "submit_s": [0.0] * n + [100.0],
        "known_s": [10.0 + i for i in range(n)] + [200.0],
        "used": [*uses, 0.0],
        "cap": [INF] * n + [cap],
    }
    if x is not None:
        columns["x"] = [*x, query_x if query_x is not None else x[-1]]
    return columns


def _last(method, columns, **kwargs):
    first, retry = peer_requests(method, **columns, **kwargs)
    return first[-1], retry[-1]


def test_tovar_chooses_the_allocation_of_least_expected_waste():
    # Uses [1, 2, 2, 10], largest seen M = 10. Waste of a first allocation a:
    # fits: a - u; fails: a (the failed attempt) + (M - u) (the retry at M).
    #   a=1:  fits 1 (0);        fails 2, 2, 10: (1+8) + (1+8) + (1+0) = 19
    #   a=2:  fits 1, 2, 2 (1+0+0 = 1); fails 10: 2 + 0 = 2        -> 3
    #   a=10: fits all: 9 + 8 + 8 + 0                              -> 25
    # a=2 is the cheapest; the retry is M = 10.
    assert _last("tovar", _history([1, 2, 2, 10])) == (2.0, 10.0)


def test_tovar_prefers_the_larger_allocation_on_a_tie():
    # Uses [1, 3], M = 3: a=1 wastes 0 + (1 + 0) = 1; a=3 wastes 2 + 0 = 2. So 1.
    # Uses [2, 4], M = 4: a=2 wastes 0 + (2 + 0) = 2; a=4 wastes 2 + 0 = 2: a tie,
    # the larger allocation fails no job, so 4.
    assert _last("tovar", _history([1, 3]))[0] == 1.0
    assert _last("tovar", _history([2, 4]))[0] == 4.0


def test_witt_percentile_is_the_95th_percentile_and_doubles_on_retry():
    # Sorted uses [1, 2, 2, 10]: position 0.95 * 3 = 2.85, between 2 (index 2) and
    # 10 (index 3): 2 + 0.85 * 8 = 8.8; the retry doubles it: 17.6.
    first, retry = _last("witt_percentile", _history([10, 2, 1, 2]))
    assert first == pytest.approx(8.8) and retry == pytest.approx(17.6)


def test_witt_lwr_follows_the_feature():
    # Use is exactly 2x: the fit is exact, every residual 0, so the offset is 0 and
    # a job with x = 10 asks for 20 (Tovar, blind to x, would ask for the 6 seen).
    columns = _history([2, 4, 6], x=[1, 2, 3], query_x=10)
    assert _last("witt_lwr", columns) == (pytest.approx(20.0), pytest.approx(40.0))
    assert _last("tovar", {k: v for k, v in columns.items() if k != "x"})[0] == 6.0


def test_witt_lwr_offset_of_least_wastage():
    # x = [1, 2, 3, 4], u = [1, 3, 2, 4]: slope 4 / 5 = 0.8, intercept 2.5 - 2 = 0.5,
    # fit = [1.3, 2.1, 2.9, 3.7], residuals [-0.3, 0.9, -0.9, 0.3].
    # Offset o gives a = fit + o; a fit wastes a - u, a failure a + (2a - u).
    # Candidates must let every row fit at a or 2a: o >= max(u/2 - fit) = -0.6.
    #   o=-0.3: a=[1.0,1.8,2.6,3.4]: 0 + (1.8+0.6) + 0.6 + (3.4+2.8) = 9.2
    #   o=0.3:  a=[1.6,2.4,3.2,4.0]: 0.6 + (2.4+1.8) + 1.2 + 0       = 6.0
    #   o=0.9:  a=[2.2,3.0,3.8,4.6]: 1.2 + 0 + 1.8 + 0.6              = 3.6
    # o = 0.9 wins; a job with x = 5 asks for 0.5 + 0.8*5 + 0.9 = 5.4, retry 10.8.
    first, retry = _last("witt_lwr", _history([1, 3, 2, 4], x=[1, 2, 3, 4], query_x=5))
    assert first == pytest.approx(5.4) and retry == pytest.approx(10.8)


def test_witt_lwr_falls_back_to_the_mean_and_may_undercut_a_rare_peak():
    # x does not vary: the fit is the mean 12 of u = [10, 10, 10, 18], residuals
    # [-2, -2, -2, 6]; candidates need o >= max(u/2 - 12) = -3.
    #   o=-2 (a=10): three fit exactly, 18 fails: 10 + (20 - 18) = 12
    #   o=6  (a=18): 8 * 3 = 24
    # So 10, retry 20.
    columns = _history([10, 10, 10, 18], x=[3, 3, 3, 3])
    assert _last("witt_lwr", columns) == (pytest.approx(10.0), pytest.approx(20.0))


def test_witt_lwr_never_counts_on_two_doublings():
    # x does not vary: fit 3.75 on u = [1, 2, 2, 10]. An allocation below 5 would
    # need two doublings for the 10, which the cost does not model, so the only
    # candidate is the largest residual: a = 10 (Tovar, retrying at the largest
    # use seen, takes 2 on the same history).
    columns = _history([1, 2, 2, 10], x=[3, 3, 3, 3])
    assert _last("witt_lwr", columns)[0] == pytest.approx(10.0)


def test_a_job_ending_after_the_submission_is_not_seen():
    # Job 0 ends at t=150, after job 2 is submitted at t=100: job 2 sees only job 1
    # (ended at 20). Job 3, submitted at 150, does not see job 0 either (strictly
    # before only). Job 4, submitted at 151, sees both. Jobs 0 and 1, submitted at
    # 0, see nothing. With job 1's use 5: jobs 2 and 3 take 5. With job 1's use
    # 50 and job 0's 5: jobs 2 and 3 take 50, job 4 Tovar on [5, 50] takes 5 (a=5
    # wastes 0 + (5 + 0) = 5, a=50 wastes 45).
    columns = {
        "key": ["a"] * 5,
        "submit_s": [0.0, 0.0, 100.0, 150.0, 151.0],
        "known_s": [150.0, 20.0, 300.0, 300.0, 300.0],
        "used": [50.0, 5.0, 1.0, 1.0, 1.0],
        "cap": [INF] * 5,
    }
    first, _ = peer_requests("tovar", **columns)
    np.testing.assert_array_equal(first, [np.nan, np.nan, 5.0, 5.0, 5.0])
    columns["used"] = [5.0, 50.0, 1.0, 1.0, 1.0]
    first, _ = peer_requests("tovar", **columns)
    np.testing.assert_array_equal(first, [np.nan, np.nan, 50.0, 50.0, 5.0])


def test_keys_do_not_mix_and_the_window_keeps_the_newest():
    # Key "b"'s use 99 never sizes key "a". With window=2, the job at t=100 sees
    # only the two newest known jobs of "a" (uses 3 and 4, not 1): the 95th
    # percentile of [3, 4] is 3.95.
    columns = {
        "key": ["a", "a", "a", "b", "a"],
        "submit_s": [0.0, 0.0, 0.0, 0.0, 100.0],
        "known_s": [10.0, 11.0, 12.0, 13.0, 200.0],
        "used": [1.0, 3.0, 4.0, 99.0, 0.0],
        "cap": [INF] * 5,
    }
    first, _ = peer_requests("witt_percentile", **columns, window=2)
    assert first[-1] == pytest.approx(3.95)


@pytest.mark.parametrize("method", PEER_METHODS)
def test_cap_bounds_both_requests(method):
    # Tovar takes 2 and retries at 10; the percentile 8.8, retry 17.6; LWR (mean
    # fit, see above) 10, retry 20. A cap of 9 bounds every one of them.
    columns = _history([1, 2, 2, 10], x=[3, 3, 3, 3], cap=9.0)
    if method != "witt_lwr":
        del columns["x"]
    first, retry = _last(method, columns)
    assert first <= 9.0 and retry == 9.0


@pytest.mark.parametrize("method", PEER_METHODS)
def test_no_history_gets_the_cap_or_no_value(method):
    # Nothing is known before any submission: a job with a request gets it, a job
    # without one gets NaN ("no value": the caller uses its default).
    columns = {
        "key": ["a", "a"],
        "submit_s": [0.0, 5.0],
        "known_s": [10.0, 20.0],
        "used": [1.0, 2.0],
        "cap": [7.0, INF],
        "x": [1.0, 1.0],
    }
    if method != "witt_lwr":
        del columns["x"]
    first, retry = peer_requests(method, **columns)
    np.testing.assert_array_equal(first, [7.0, np.nan])
    np.testing.assert_array_equal(retry, [7.0, np.nan])


def test_empty_input_gives_empty_requests():
    first, retry = peer_requests("tovar", [], [], [], [], [])
    assert first.shape == retry.shape == (0,)


def test_many_keys_match_a_job_by_job_loop(seed):
    # The vectorised windows against a plain loop over jobs, on random data.
    rng = np.random.default_rng(seed)
    n = 400
    key = rng.integers(0, 7, n)
    submit = rng.uniform(0, 1000, n)
    known = submit + rng.exponential(50, n)
    used = rng.lognormal(0, 1, n)
    first, retry = peer_requests("tovar", key, submit, known, used, np.full(n, INF))
    for i in range(n):
        seen = (key == key[i]) & (known < submit[i])
        if not seen.any():
            assert np.isnan(first[i])
            continue
        past = used[seen][np.argsort(known[seen], kind="stable")][-100:]
        m, top = past.size, past.max()
        waste = [m * a + top * np.sum(past > a) for a in past]
        assert first[i] == past[np.argmin(waste)] or np.isclose(
            min(waste), m * first[i] + top * np.sum(past > first[i])
        )
        assert retry[i] == top


_GOOD = {
    "key": ["a", "a"],
    "submit_s": [0.0, 5.0],
    "known_s": [1.0, 6.0],
    "used": [1.0, 2.0],
    "cap": [INF, INF],
}


@pytest.mark.parametrize(
    ("change", "match"),
    [
        ({"method": "scouts"}, "'method' field must be one of"),
        ({"window": 0}, "'window' field must be a positive integer. Got 0"),
        ({"window": 2.5}, "'window' field must be a positive integer. Got 2.5"),
        ({"used": [1.0]}, "must be 1-D and of one length"),
        ({"used": [1.0, -2.0]}, "'used' field must hold finite numbers >= 0"),
        ({"used": ["a", "b"]}, "'used' field must hold numbers"),
        ({"submit_s": [0.0, np.nan]}, "'submit_s' field must hold finite numbers"),
        ({"cap": [0.0, INF]}, "'cap' field must hold positive numbers"),
        ({"cap": [np.nan, INF]}, "'cap' field must hold positive numbers"),
        ({"known_s": [1.0, 4.0]}, "'known_s' field must not be before 'submit_s'"),
        ({"method": "witt_lwr"}, "'x' field must be given for method 'witt_lwr'"),
        ({"method": "witt_lwr", "x": [1.0, INF]}, "'x' field must hold finite"),
    ],
    ids=[
        "method",
        "window-zero",
        "window-float",
        "ragged",
        "negative-use",
        "text-use",
        "nan-submit",
        "zero-cap",
        "nan-cap",
        "known-before-submit",
        "lwr-without-x",
        "lwr-infinite-x",
    ],
)
def test_bad_input_is_refused(change, match):
    arguments = {"method": "tovar", **_GOOD, **change}
    method = arguments.pop("method")
    with pytest.raises(ValueError, match=match):
        peer_requests(method, **arguments)
