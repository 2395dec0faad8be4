"""The expected-cost choice on hand-made distributions whose answer is worked out."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from panda_predictor.core.bins import TargetBins
from panda_predictor.core.decide import cost_choice
from panda_predictor.core.decide.cost_choice import (
    CostChooser,
    CostSettings,
    Sizing,
    candidate_points,
    job_cost,
)
from panda_predictor.core.decide.use_table import DEFAULT_POINTS, UseTable

#: Class 0 always uses 100 s, class 1 always 1000 s.
TWO_TIMES = UseTable(((100.0,) * 4, (1000.0,) * 4))
#: Class 0 always uses 900 MB per core, class 1 always 1900.
TWO_MEMORIES = UseTable(((900.0,) * 4, (1900.0,) * 4))


def chooser(table=TWO_TIMES, target="walltime", requeue_runs=0.0, **settings):
    ladder = [row[0] for row in table.points]
    settings = CostSettings(requeue_runs=requeue_runs, **settings)
    return CostChooser(target, table, ladder, settings)


def test_a_certain_use_is_written_exactly_and_costs_nothing():
    sized = chooser(delay_price=0.5).choose(np.array([[1.0, 0.0], [0.0, 1.0]]))
    assert sized.value.tolist() == [100.0, 1000.0]
    assert sized.expected_cost.tolist() == [0.0, 0.0]
    assert sized.p_short.tolist() == [0.0, 0.0]


@pytest.mark.parametrize(
    ("p", "written", "cost"),
    [
        # E[u] = 550. Writing 100: half the jobs fail after 100 s, lose
        # 100 * (1 + 0.5) and retry one class up at 1000, which fits exactly:
        # 0.5 * 150 / 550 = 0.136. Writing 1000: half waste 900 s: 0.818.
        ((0.5, 0.5), 100.0, 0.5 * 150 / 550),
        # E[u] = 910. Writing 100: 0.9 * 150 / 910 = 0.148; writing 1000:
        # 0.1 * 900 / 910 = 0.099, cheaper.
        ((0.1, 0.9), 1000.0, 0.1 * 900 / 910),
    ],
)
def test_time_takes_the_value_of_lowest_expected_cost(p, written, cost):
    sized = chooser(delay_price=0.5).choose(np.array([p]))
    assert sized.value[0] == written
    assert sized.expected_cost[0] == pytest.approx(cost)


def test_the_retrys_wait_in_the_queue_makes_the_choice_safer():
    # p = (0.5, 0.5): writing 100 costs 0.136 + 0.5 * 0.5 * requeue_runs (the
    # failed half waits requeue_runs runs at price 0.5), writing 1000 costs 0.818.
    # 2 runs: 0.636 < 0.818 (still 100); 3 runs: 0.886 (1000).
    p = np.array([[0.5, 0.5]])
    assert chooser(delay_price=0.5, requeue_runs=2.0).choose(p).value[0] == 100.0
    assert chooser(delay_price=0.5, requeue_runs=3.0).choose(p).value[0] == 1000.0


def test_memory_follows_pandas_steps_after_a_failure():
    # A slot is 2 GB per core: one job run is 2048 MB per core. p = (0.9, 0.1):
    # writing 900, a class-1 job fails (1.5 runs lost), PanDA retries at 1000,
    # fails again (1.5), then 2000 fits wasting 100/2048: 0.1 * 3.049 = 0.305.
    # Writing 1900 wastes 1000/2048 on class 0: 0.9 * 0.488 = 0.439.
    c = chooser(TWO_MEMORIES, "ramcount", delay_price=0.5)
    sized = c.choose(np.array([[0.9, 0.1], [0.5, 0.5]]))
    assert sized.value.tolist() == [900.0, 1900.0]
    assert sized.expected_cost[0] == pytest.approx(0.1 * (3.0 + 100 / 2048))
    assert sized.p_short[0] == pytest.approx(0.1)


def test_the_request_caps_the_value_and_is_a_candidate():
    c = chooser(delay_price=0.5)
    p = np.array([[0.0, 1.0], [0.1, 0.9], [0.1, 0.9]])
    sized = c.choose(p, request=[500.0, np.nan, 5000.0])
    # Certain class 1, request 500: a job cannot use more than it asked for, so
    # the request itself fits and is written.
    assert sized.value[0] == 500.0 and sized.from_request[0]
    assert sized.p_short[0] == 0.0
    # No request: as without one. A request far above the use is not chosen.
    assert sized.value[1] == sized.value[2] == 1000.0
    assert not sized.from_request[1:].any()


def test_an_unpriced_target_writes_its_fallback_class_at_no_cost():
    table = UseTable(((10.0,) * 3, (800.0,) * 3))
    c = CostChooser("iointensity", table, [10.0, 800.0], CostSettings())
    sized = c.choose(np.array([[0.7, 0.3], [0.2, 0.8]]), fallback_class=[1, 0])
    assert sized.value.tolist() == [800.0, 10.0]
    assert sized.expected_cost.tolist() == [0.0, 0.0]
    assert sized.p_short == pytest.approx([0.0, 0.8])


def test_job_cost_counts_the_failed_attempts():
    cost, failures = job_cost(
        "time",
        [100.0, 1000.0],
        [1000.0, 1000.0],
        1000.0,
        [100.0, 1000.0],
        CostSettings(delay_price=0.0),
    )
    assert failures.tolist() == [1.0, 0.0]
    assert cost.tolist() == pytest.approx([0.1, 0.0])


def test_the_scouts_cost_their_first_jobs_at_the_default():
    # Scouts ask for the request (here 2000 s; certain class 0 uses 100: 1900 s
    # spare per job of 100 s: 19 job runs) or, without one, the top class's value
    # (1000: 9 job runs); they never fail.
    sized = chooser(delay_price=0.5).choose(
        np.array([[1.0, 0.0], [1.0, 0.0]]), request=[2000.0, np.nan]
    )
    assert sized.scouts_cost == pytest.approx([19.0, 9.0])


@pytest.mark.parametrize(
    ("make", "field"),
    [
        (lambda: CostSettings(delay_price=-1.0), "'delay_price' field"),
        (lambda: CostSettings(gb_per_core=0.0), "'gb_per_core' field"),
        (lambda: UseTable(((2.0, 1.0),)), "'points' field"),
        (lambda: CostSettings.from_dict({"price": 1}), "unexpected ['price']"),
        (lambda: CostSettings(requeue_runs=-1.0), "'requeue_runs' field"),
        (lambda: chooser(target="disk"), "'target' field"),
    ],
)
def test_bad_input_names_the_field(make, field):
    with pytest.raises(ValueError, match=field.replace("[", r"\[").replace("]", r"\]")):
        make()


@pytest.mark.parametrize("target", ["walltime", "ramcount", "iointensity"])
def test_a_task_alone_gets_the_same_bits_as_in_a_batch(seed, target, monkeypatch):
    """The serving route sizes one task at a time, the bulk route thousands: the
    same task must get the same value, cost and confidence, to the last bit
    (a BLAS product did not: its rounding depends on the batch size). A large
    batch is sized in parts (here of 500 tasks, so three parts)."""
    monkeypatch.setattr(cost_choice, "CHOOSE_ROWS", 500)
    rng = np.random.default_rng(seed)
    table = UseTable(
        tuple(tuple(np.sort(rng.uniform(lo, lo * 3, 6))) for lo in (50, 400, 900, 3000))
    )
    sizer = CostChooser(
        target,
        table,
        table.array[:, -1],
        CostSettings(delay_price=1.0, requeue_runs=1.0),
    )
    n = 1024 + 300  # past one block of rows
    p = rng.dirichlet(np.ones(4) * 0.7, n)
    # no request, a request below every candidate, on a candidate, between, above
    on_a_candidate = float(sizer.candidates[sizer.candidates.size // 2])
    request = rng.choice(
        [np.nan, 0.0, -1.0, 1.0, on_a_candidate, 700.0, 2500.0, 1e5], n
    )
    fallback = p.argmax(axis=1)
    batch = sizer.choose(p, request, fallback)
    fields = [f.name for f in dataclasses.fields(Sizing)]
    for i in [*range(0, n, 7), n - 1]:
        one = sizer.choose(p[i : i + 1], request[i : i + 1], fallback[i : i + 1])
        for field in fields:
            got = getattr(one, field)
            assert got.tolist() == [getattr(batch, field)[i]], (field, i)
            assert got.dtype == getattr(batch, field).dtype, field


def test_priced_shows_every_candidate_and_choose_takes_the_cheapest():
    c = chooser(TWO_TIMES)
    p = np.array([[0.5, 0.5], [0.1, 0.9]])
    expected, p_short, scale = c.priced(p)
    assert expected.shape == p_short.shape == (2, c.candidates.size)
    sized = c.choose(p)
    best = expected.argmin(axis=1)
    assert sized.value.tolist() == c.candidates[best].tolist()
    assert sized.expected_cost.tolist() == expected[[0, 1], best].tolist()
    # Half the tasks use 1000 s: 100 s is too little half the time, 1000 never.
    assert p_short[0, c.candidates.tolist().index(100.0)] == pytest.approx(0.5)
    assert p_short[0, c.candidates.tolist().index(1000.0)] == 0.0
    assert scale.tolist() == pytest.approx([550.0, 910.0])
    unpriced = CostChooser("iointensity", TWO_TIMES, [10.0, 800.0], CostSettings())
    with pytest.raises(ValueError, match="'iointensity' is not priced"):
        unpriced.priced(p)


def test_a_careful_value_is_short_for_at_most_the_tables_blind_tail():
    # One class whose use has a long tail (lognormal). With a dear delay price the
    # choice takes the smallest value the table says is never short; the share of
    # the class's own training values above it is the tail the table cannot see:
    # 1 / (2 * DEFAULT_POINTS) (0.5 %), not the 2.5 % of a 20-point table.
    use = np.random.default_rng(7).lognormal(8.0, 1.0, 4000)
    # Two classes; every task is known to be of the top one (above 1 s).
    bins = TargetBins("walltime", (1.0,), (1.0, float(np.median(use))))
    table = UseTable.fit(use, bins.assign(use), bins)
    sized = CostChooser(
        "walltime", table, bins.values, CostSettings(delay_price=10_000.0)
    ).choose(np.array([[0.0, 1.0]]))
    short = float(np.mean(use > sized.value[0]))
    assert short <= 1.0 / (2 * DEFAULT_POINTS) + 1e-9
    assert short < 0.025


@pytest.mark.parametrize(
    ("width", "expected"),
    [
        (20, list(range(20))),
        (100, [*range(2, 100, 5), 99]),
        (7, list(range(7))),
    ],
)
def test_candidates_come_from_every_step_of_the_table_and_its_top(width, expected):
    points = np.tile(np.arange(width, dtype=float), (3, 1))
    assert candidate_points(points)[0].tolist() == [float(c) for c in expected]


def test_a_task_sure_to_use_nothing_prices_against_the_shortest_run():
    # Class 0 always uses 0 s (the demo's walltime has such a class), class 1
    # 10 to 40 s. Sure of class 0, a job run is the table's shortest positive
    # use, 10 s, not 1e-12 s: writing 40 costs 40 / 10 = 4 runs (it was 4e13);
    # the cheapest candidate, 10 (values are positive), costs 1 run, as do the
    # scouts, who ask for the top class's value, 10.
    table = UseTable(((0.0,) * 4, (10.0, 20.0, 30.0, 40.0)))
    c = chooser(table, delay_price=0.25)
    assert c.shortest_run == 10.0
    expected, _, scale = c.priced(np.array([[1.0, 0.0]]))
    assert scale.tolist() == [10.0]
    assert expected[0, c.candidates.tolist().index(40.0)] == pytest.approx(4.0)
    sized = c.choose(np.array([[1.0, 0.0]]))
    assert sized.value[0] == 10.0
    assert sized.expected_cost[0] == pytest.approx(1.0)
    assert sized.scouts_cost[0] == pytest.approx(1.0)
    # A task expected to use more than the shortest run keeps its own scale.
    assert c.priced(np.array([[0.0, 1.0]]))[2].tolist() == [25.0]


def test_a_table_of_no_use_at_all_prices_in_units():
    # No job ever used anything: a run is 1 unit, so the request of 10 spares
    # 10 runs (it was 1e13 runs with the floor at 1e-12).
    c = chooser(UseTable(((0.0,) * 4, (0.0,) * 4)), delay_price=0.25)
    assert c.shortest_run == 1.0
    sized = c.choose(np.array([[0.5, 0.5]]), request=[10.0])
    assert sized.scouts_cost[0] == pytest.approx(10.0)
