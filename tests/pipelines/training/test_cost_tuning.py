"""The delay prices chosen per target by replaying the validation tasks.

Hand-made replay rows for the margin and the choice; one real training run for
the wiring (the bundle serves one price per priced target, the operator's
setting replaces them all).
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd
import pytest

from panda_predictor.bins_file import load_bins
from panda_predictor.core.assess.day_bootstrap import DayBootstrap
from panda_predictor.core.decide.cost_choice import CostSettings
from panda_predictor.core.features.pipeline import TASK_COLUMNS
from panda_predictor.core.replay.engine import JobOutcomes
from panda_predictor.serving.loader import served_cost
from panda_predictor.serving.predictor import Predictor
from pipelines.training.config import AUTO, TrainingConfig
from pipelines.training.cost_tuning import (
    SCOUTS_VALUE,
    SCOUTS_VALUE_LABEL,
    TUNED_PRICES,
    ResampledFigures,
    _best_early_prices,
    _best_price,
    _keeps,
    _sizing,
    _sizing_for_early,
    choose_price,
    meets_scouts,
    price_margin,
    waste_saving,
)
from pipelines.training.served_replay import replay_jobs
from pipelines.training.train import _cost_settings, train

BINS = load_bins()
PRICED = ("ramcount", "cputime", "walltime")


def jobs(failed: list[bool], wasted: list[float]) -> JobOutcomes:
    n = len(failed)
    zeros = np.zeros(n)
    return JobOutcomes(
        np.array(failed),
        np.zeros(n, bool),
        np.array(failed, int),
        zeros,
        zeros,
        zeros,
        np.array(wasted, float),
        np.zeros(1),
    )


def resampled(boot: DayBootstrap, *rows: JobOutcomes) -> list[ResampledFigures]:
    return [ResampledFigures.of(row, boot) for row in rows]


ONE_DAY = DayBootstrap(np.zeros(10, dtype=int), n_resamples=3)
SCOUTS = jobs([True] + [False] * 9, [10.0] * 10)  # 0.1 failed, 10 h per job


@pytest.mark.parametrize(
    ("mine", "margin"),
    [
        (jobs([False] * 10, [9.0] * 10), 0.10),  # waste binds: 10 % < 100 %
        (jobs([True, True] + [False] * 8, [5.0] * 10), -1.0),  # failures bind
        (jobs([True] + [False] * 9, [12.0] * 10), -0.20),  # more waste
    ],
    ids=["waste-binds", "failures-bind", "more-waste"],
)
def test_margin_is_the_smaller_relative_saving(mine, margin):
    # One day: every resample is that day, so the expectation is the point value.
    assert price_margin(*resampled(ONE_DAY, mine, SCOUTS)) == pytest.approx(margin)


def test_a_scouts_rate_of_zero_divides_by_the_floor():
    never = jobs([False] * 10, [10.0] * 10)
    once = jobs([True] + [False] * 9, [1.0] * 10)
    assert price_margin(*resampled(ONE_DAY, once, never)) == pytest.approx(-0.1 / 1e-3)


def test_a_lead_within_the_days_noise_counts_for_less():
    # Day 0: 50 % more failures, 50 % less waste than scouts; day 1 the reverse.
    # Pooled, both figures tie the scouts' (margin 0); on resampled days the
    # worse figure of each draw counts, so the margin is below 0.
    days = np.repeat([0, 1], 10)
    scouts = jobs(([True] * 2 + [False] * 8) * 2, [10.0] * 20)
    mine = jobs(
        [True] * 3 + [False] * 7 + [True] + [False] * 9, [5.0] * 10 + [15.0] * 10
    )
    point = price_margin(*resampled(DayBootstrap(np.zeros(20, int), 1), mine, scouts))
    assert point == pytest.approx(0.0)
    assert price_margin(*resampled(DayBootstrap(days, 400), mine, scouts)) < -0.1


def test_a_lead_carried_by_few_days_loses_to_one_that_holds():
    # Ten days of ten jobs; the scouts fail 2 and waste 10 h per job every day.
    # "steady" fails 1 and wastes 9.5 every day: a worst saving of 5 % each day.
    # "lucky" ties the scouts on nine days and fails and wastes nothing on one:
    # about 10 % saved on average, but nothing on a bad quarter of the days.
    days = np.repeat(np.arange(10), 10)
    day = [True] * 2 + [False] * 8
    scouts = jobs(day * 10, [10.0] * 100)
    steady = jobs(([True] + [False] * 9) * 10, [9.5] * 100)
    lucky = jobs(day * 9 + [False] * 10, [10.0] * 90 + [0.0] * 10)
    boot = DayBootstrap(days, 400)

    def mean_margin(mine):
        ones = np.ones(100)
        saved = [
            (boot.resampled(a, ones) - boot.resampled(b, ones))
            / boot.resampled(a, ones)
            for a, b in (
                (scouts.failed, mine.failed),
                (scouts.wasted_hours, mine.wasted_hours),
            )
        ]
        return float(np.mean(np.minimum(*saved)))

    assert mean_margin(lucky) > mean_margin(steady)
    assert price_margin(*resampled(boot, steady, scouts)) == pytest.approx(0.05)
    assert price_margin(*resampled(boot, lucky, scouts)) < 0.01


def test_best_price_takes_the_largest_margin_and_the_dearer_price_on_ties():
    assert _best_price({0.5: -0.1, 2.0: 0.03, 4.0: 0.01}) == 2.0
    assert _best_price({1.0: 0.02, 8.0: 0.02, 16.0: -0.5}) == 8.0


def test_the_scouts_value_wins_only_where_every_price_does_worse():
    assert _best_price({4.0: -0.3, 256.0: -0.01, SCOUTS_VALUE: 0.0}) == SCOUTS_VALUE
    # A price that ties it wins: it saves where it can (the demo's walltime).
    assert _best_price({16.0: -0.2, 256.0: 0.0, SCOUTS_VALUE: 0.0}) == 256.0
    assert _best_price({4.0: 0.05, SCOUTS_VALUE: 0.0}) == 4.0


def test_a_price_that_meets_the_scouts_within_the_noise_replaces_their_value():
    # The demo-like case: every price fails a few more jobs than the scouts, so
    # the scouts' value has the best margin; 256 meets the scouts' goals within
    # the noise and saves 70 % of the waste, 64 saves more but fails more.
    margin = {64.0: -0.41, 256.0: -0.21, SCOUTS_VALUE: -0.002}
    assert _best_price(margin) == SCOUTS_VALUE
    assert _best_price(margin, {256.0: 0.7, 64.0: 0.8}) == 256.0
    # Only a price that saves waste replaces it ...
    assert _best_price(margin, {256.0: -0.01}) == SCOUTS_VALUE
    # ... and only the scouts' value is replaced: a price chosen on its margin
    # stays, even where a cheaper one would save more within the noise.
    assert _best_price({4.0: 0.05, 16.0: 0.02}, {16.0: 0.5}) == 4.0


def test_beside_a_scouts_valued_target_the_others_choose_as_re_measured_early():
    # OSC's second period (development part): run time's prices all lost to its
    # scouts' value; CPU time's 64 led with only the scouts-valued tasks marked.
    # Served, every applied task is then re-measured early, where 64 loses to 16.
    margin = {
        "walltime": {16.0: -0.05, 64.0: -0.22, SCOUTS_VALUE: 0.0},
        "cputime": {16.0: 0.02, 64.0: 0.22, SCOUTS_VALUE: 0.0},
    }
    whole = {
        "walltime": {16.0: -0.04, 64.0: -0.2},
        "cputime": {16.0: 0.05, 64.0: -0.01},
    }
    targets = ["walltime", "cputime"]
    assert _best_early_prices(margin, whole, targets) == {
        "walltime": SCOUTS_VALUE,
        "cputime": 16.0,
    }
    # No price better than the scouts' value there either: both write it.
    worse = {**whole, "cputime": {16.0: -0.01, 64.0: -0.02}}
    assert set(_best_early_prices(margin, worse, targets).values()) == {SCOUTS_VALUE}
    # No target writes its scouts' value: no task is marked for it, the margins
    # stand as they are.
    led = {**margin, "walltime": {16.0: 0.01, 64.0: -0.22, SCOUTS_VALUE: 0.0}}
    assert _best_early_prices(led, whole, targets) == {
        "walltime": 16.0,
        "cputime": 64.0,
    }


def test_meets_scouts_allows_the_noise_of_the_paired_difference():
    # Ten days of ten jobs, the scouts fail one job a day. "day_off" fails one
    # more on a single day: 0.011 against 0.010, within the noise of resampled
    # days. "every_day" fails one more every day: beyond it, though its waste
    # is half the scouts'.
    days = np.repeat(np.arange(10), 10)
    day = [True] + [False] * 9
    scouts = jobs(day * 10, [10.0] * 100)
    day_off = jobs([True, True] + [False] * 8 + day * 9, [5.0] * 100)
    every_day = jobs(([True] * 2 + [False] * 8) * 10, [5.0] * 100)
    boot = DayBootstrap(days, 400)
    assert meets_scouts(*resampled(boot, day_off, scouts))
    assert not meets_scouts(*resampled(boot, every_day, scouts))
    assert waste_saving(*resampled(boot, every_day, scouts)) == pytest.approx(0.5)
    # Less waste is never held against it; more, beyond the noise, is.
    wasteful = jobs(day * 10, [11.0] * 100)
    assert not meets_scouts(*resampled(boot, wasteful, scouts))


def test_tasks_replay_as_bursts_of_one_user_and_transformation():
    minute = np.timedelta64(1, "m")
    start = np.datetime64("2026-01-01T00:00")
    tasks = pd.DataFrame(
        {
            "creationdate": [start + k * minute for k in (0, 30, 30, 180)],
            "username": ["ann", "ann", "bob", "ann"],
            "transpath": ["sim", "sim", "sim", "sim"],
            "corecount": [8.0, np.nan, 1.0, 1.0],
            "actualcorecount": [16.0, np.nan, np.nan, 2.0],
            "walltime": [7200.0, np.nan, 60.0, 60.0],
            "ramcount": [1500.0, 2500.0, 900.0, 0.5],
        }
    )
    request = np.array([2000.0, np.nan, 4000.0, 1000.0])
    jobs = replay_jobs(tasks, "ramcount", request, BINS["ramcount"])
    # ann's first two tasks are one burst; bob's is his own; ann's late one too.
    assert jobs.task[0] == jobs.task[1] and len(set(jobs.task.tolist())) == 3
    assert jobs.resource == "memory"
    assert jobs.used.tolist() == [1500.0, 2500.0, 900.0, 1.0]  # at least 1 unit
    # The cores a job ran on, else those it asked for, else one.
    assert jobs.cores.tolist() == [16.0, 1.0, 1.0, 2.0]
    assert jobs.run_s.tolist() == [7200.0, 3600.0, 60.0, 60.0]  # unknown: an hour
    top = BINS["ramcount"].values[-1]
    assert jobs.default.tolist() == [2000.0, top, 4000.0, 1000.0]
    # Without a request memory asks for the queue's default where one is given.
    queue = replay_jobs(tasks, "ramcount", request, BINS["ramcount"], no_request=2e3)
    assert queue.default.tolist() == [2000.0, 2000.0, 4000.0, 1000.0]
    time_jobs = replay_jobs(tasks, "walltime", None, BINS["walltime"])
    assert time_jobs.resource == "time" and np.isinf(time_jobs.cap).all()


@pytest.fixture(scope="module")
def tuned(labelled_history):
    # PanDA's own re-measurement, whose choice per target the next test checks;
    # the default ("auto") is checked by its own test below.
    config = TrainingConfig(
        model_kinds=("xgboost",), xgboost={"n_estimators": 30}, early_remeasure=False
    )
    return train(labelled_history, BINS, config)


def test_training_serves_one_tuned_choice_per_priced_target(tuned, labelled_history):
    cost, info = tuned.bundle.cost, tuned.bundle.info["cost"]
    prices = dict(cost.target_prices)
    as_scouts = cost.scouts_value_targets
    # Every priced target has a price or writes its scouts' value, not both.
    assert set(prices) | set(as_scouts) == set(PRICED)
    assert not set(prices) & set(as_scouts)
    assert prices == info["target_prices"]
    assert list(as_scouts) == info["scouts_value_targets"]
    # The chosen candidate by its printed name (the training report's bold cell).
    assert info["chosen"] == {
        **{t: f"{p:g}" for t, p in prices.items()},
        **{t: SCOUTS_VALUE_LABEL for t in as_scouts},
    }
    assert all(p in TUNED_PRICES for p in prices.values())
    assert cost.delay_price == max(prices.values(), default=max(TUNED_PRICES))
    for t in PRICED:
        # The choice has the best validation margin of every candidate, or of
        # the prices that save waste within the noise where the scouts' value
        # has the best.
        margins = info["margin_at"][t]
        names = {f"{p:g}" for p in TUNED_PRICES} | {SCOUTS_VALUE_LABEL}
        assert set(margins) == names
        chosen = SCOUTS_VALUE_LABEL if t in as_scouts else f"{prices[t]:g}"
        savers = {
            p for p, saved in info["saving_within_noise_at"][t].items() if saved > 0
        }
        best = max(margins.values())
        if margins[SCOUTS_VALUE_LABEL] == best and savers:
            assert chosen in savers
            assert margins[chosen] == max(margins[p] for p in savers)
        else:
            assert margins[chosen] == best
    # Each target's values are chosen with its own price or its scouts' value ...
    policy = Predictor(tuned.bundle, "t", "1").policy
    for t in PRICED:
        chooser = policy.choosers[t]
        assert chooser.writes_scouts_value == (t in as_scouts)
        if t in prices:
            assert chooser.settings.delay_price == prices[t]
    # ... unless the operator sets one price for all of them.
    operator = Predictor(tuned.bundle, "t", "1", served_cost(tuned.bundle, 3.0)).policy
    assert {operator.choosers[t].settings.delay_price for t in PRICED} == {3.0}
    assert not any(operator.choosers[t].writes_scouts_value for t in PRICED)
    assert not cost.early_remeasure and info["early_remeasure"] is False  # as set
    assert "early_remeasure_chosen" not in info  # chosen only at "auto"


def test_training_chooses_the_early_remeasurement_by_default(labelled_history):
    config = TrainingConfig(model_kinds=("xgboost",), xgboost={"n_estimators": 30})
    assert config.early_remeasure == AUTO
    bundle = train(labelled_history, BINS, config).bundle
    cost, info = bundle.cost, bundle.info["cost"]
    # Both ways were tuned (the rule between them: the test below) and the
    # bundle serves the way chosen, with that way's prices.
    asked = info["early_remeasure_chosen"]
    assert set(asked["served_margin"]) == {"False", "True"}
    early = info["early_remeasure"]
    assert cost.early_remeasure is early
    assert info["chosen"] == asked["chosen"][str(early)]
    assert info["margin_at"] == asked["margin_at"][str(early)]


def test_choose_price_tries_only_the_given_prices(tuned, labelled_history):
    frame = labelled_history.frame
    val = frame.iloc[-len(frame) // 10 :]
    untuned = tuned.bundle
    cost, info = choose_price(untuned, val, frame, prices=(0.5, 16.0))
    assert set(info["margin_at"]["walltime"]) == {"0.5", "16", SCOUTS_VALUE_LABEL}
    chosen = dict(cost.target_prices).get("walltime")
    assert chosen in (0.5, 16.0) or "walltime" in cost.scouts_value_targets


def test_cost_settings_round_trip_with_target_prices():
    own = (("walltime", 4.0), ("ramcount", 0.5))
    cost = CostSettings(delay_price=4.0, target_prices=own)
    assert CostSettings.from_dict(cost.to_dict()) == cost
    assert cost.for_target("ramcount").delay_price == 0.5
    assert cost.for_target("cputime").delay_price == 4.0  # no own price
    assert cost.with_price(2.0).for_target("ramcount").delay_price == 2.0


def test_the_early_remeasurement_round_trips_and_is_off_unless_set():
    assert CostSettings().early_remeasure is False
    assert "early_remeasure" not in CostSettings().to_dict()  # older bundles
    on = CostSettings(early_remeasure=True)
    assert CostSettings.from_dict(on.to_dict()) == on
    assert (
        on.with_price(2.0).early_remeasure and on.for_target("walltime").early_remeasure
    )
    with pytest.raises(ValueError, match="'early_remeasure' field must be true or"):
        CostSettings.from_dict({"early_remeasure": "yes"})


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"target_prices": (("memory", 1.0),)}, "'target_prices' field must hold"),
        ({"target_prices": (("walltime", -1.0),)}, "'target_prices.walltime' field"),
        ({"fixed_targets": ("walltime",)}, "'fixed_targets' field must be a tuple"),
        ({"fixed_targets": ["ramcount"]}, "'fixed_targets' field must be a tuple"),
        (
            {"scouts_value_targets": ("iointensity",)},
            "'scouts_value_targets' field must be a tuple of targets among",
        ),
        (
            {"scouts_value_targets": "walltime"},
            "'scouts_value_targets' field must be a tuple",
        ),
    ],
    ids=[
        "unknown-target",
        "negative-price",
        "unfixable-target",
        "not-a-tuple",
        "unpriced-scouts-value",
        "scouts-value-string",
    ],
)
def test_cost_settings_refuse_bad_target_prices(kwargs, match):
    with pytest.raises(ValueError, match=match):
        CostSettings(**kwargs)


def test_values_are_written_fixed_only_where_that_beats_re_measurement():
    # The best fixed margin must beat the best re-measured one, at any price.
    assert _keeps({1.0: 0.10, 4.0: 0.30}, {1.0: 0.20, 4.0: 0.25})
    assert not _keeps({1.0: 0.25}, {1.0: 0.10, 4.0: 0.25})  # a tie: PanDA's own
    assert not _keeps({}, {1.0: 0.1})  # a target PanDA cannot keep fixed


def test_cost_settings_round_trip_with_scouts_value_targets():
    cost = CostSettings(
        target_prices=(("ramcount", 0.5),), scouts_value_targets=("walltime",)
    )
    assert CostSettings.from_dict(cost.to_dict()) == cost
    assert cost.for_target("walltime").scouts_value_targets == ("walltime",)
    assert cost.for_target("ramcount").scouts_value_targets == ()
    # An operator's single price sizes every target with it.
    assert cost.with_price(2.0).scouts_value_targets == ()
    assert CostSettings.from_dict({"delay_price": 1.0}).scouts_value_targets == ()
    with pytest.raises(ValueError, match="'scouts_value_targets' field must be a list"):
        CostSettings.from_dict({"scouts_value_targets": "walltime"})


def test_training_chooses_fixed_values_on_the_validation_replay(
    tuned, labelled_history
):
    cost, info = tuned.bundle.cost, tuned.bundle.info["cost"]
    # Only memory can be written Fixed; it is tried at every price.
    assert set(info["fixed_margin_at"]) == {"ramcount"} & set(PRICED)

    kept = info["fixed_margin_at"].get("ramcount", {})
    remeasured = info["margin_at"].get("ramcount", {})
    assert set(kept) == set(remeasured)
    fixed = bool(kept) and max(kept.values()) > max(remeasured.values())
    assert cost.fixed_targets == (("ramcount",) if fixed else ())
    assert info["fixed_targets"] == list(cost.fixed_targets)
    # The served records carry the choice in their unit.
    predictor = Predictor(tuned.bundle, "t", "1")
    assert predictor.fixed_targets == cost.fixed_targets
    tasks = labelled_history.history[list(TASK_COLUMNS)].head(5)
    units = {p.targets["ramcount"].unit for p in predictor.predict(tasks)}
    assert units == {"MBPerCoreFixed" if fixed else "MBPerCore"}
    chosen = dataclasses.replace(cost, fixed_targets=("ramcount",))
    forced = Predictor(tuned.bundle, "t", "1", chosen)
    assert {p.targets["ramcount"].unit for p in forced.predict(tasks)} == {
        "MBPerCoreFixed"
    }
    assert {p.targets["walltime"].unit for p in forced.predict(tasks)} == {
        tuned.bundle.bins["walltime"].unit  # never Fixed
    }


def test_cost_settings_round_trip_with_fixed_targets():
    cost = CostSettings(target_prices=(("ramcount", 0.5),), fixed_targets=("ramcount",))
    assert CostSettings.from_dict(cost.to_dict()) == cost
    # An operator's single price keeps the choice (``fixed_units`` overrides it).
    assert cost.with_price(2.0).fixed_targets == ("ramcount",)
    assert CostSettings.from_dict({"delay_price": 1.0}).fixed_targets == ()


def test_auto_serves_the_early_re_measurement_where_the_worst_target_gains():
    # LANL's first period (development part): re-measured early, run time's best
    # price keeps a margin of 0.0003 of the 0.0218 it has re-measured after 5.
    late = {
        "walltime": {64.0: 0.0218, SCOUTS_VALUE: -0.01},
        "cputime": {8.0: 0.0374, SCOUTS_VALUE: -0.02},
    }
    early = {
        "walltime": {64.0: 0.0003, SCOUTS_VALUE: 0.0},
        "cputime": {8.0: 0.05, SCOUTS_VALUE: 0.0},
    }
    whole = {t: {64.0: 0.0, 8.0: 0.0} for t in late}
    nothing: dict[str, dict[float, float]] = {t: {} for t in late}
    targets = list(late)
    off = _sizing(False, late, {}, whole, nothing, targets)
    on = _sizing(True, early, {}, whole, nothing, targets)
    assert off == ({"walltime": 64.0, "cputime": 8.0}, (), 0.0218)
    assert on == ({"walltime": 64.0, "cputime": 8.0}, (), 0.0003)
    assert not on.as_scouts
    assert _sizing_for_early({False: off, True: on}) is False
    # Where it gains on the worst target, it is served.
    better = on._replace(worst_margin=0.03)
    assert _sizing_for_early({False: off, True: better}) is True
    # A tie, within rounding, leaves PanDA's own re-measurement.
    tie = on._replace(worst_margin=0.0218 + 1e-8)
    assert _sizing_for_early({False: off, True: tie}) is False


def test_auto_serves_it_where_no_price_beats_the_scouts_value_re_measured_early():
    # KTH's second period (development part): without it price 4 leads the
    # scouts by 0.015 on the validation days; re-measured early, no price beats
    # the scouts' own value, whose tasks then replay as the scouts do. Served,
    # price 4 without it wasted more hours than the scouts.
    late = {"walltime": {4.0: 0.0153, SCOUTS_VALUE: -0.037}}
    early = {"walltime": {4.0: -0.01, SCOUTS_VALUE: 0.0}}
    whole = {"walltime": {4.0: -0.01}}
    off = _sizing(False, late, {}, whole, {"walltime": {}}, ["walltime"])
    on = _sizing(True, early, {}, whole, {"walltime": {}}, ["walltime"])
    assert off == ({"walltime": 4.0}, (), 0.0153)
    assert on == ({"walltime": SCOUTS_VALUE}, (), 0.0) and on.as_scouts
    assert _sizing_for_early({False: off, True: on}) is True
    # A target written ...Fixed keeps its value: the others decide.
    fixed = on._replace(
        chosen={**on.chosen, "ramcount": 0.25}, fixed_targets=("ramcount",)
    )
    assert fixed.as_scouts
    priced = fixed._replace(chosen={**fixed.chosen, "walltime": 4.0})
    assert not priced.as_scouts
    # With every target Fixed, none is re-measured: nothing replays as the scouts.
    memory_only = fixed._replace(chosen={"ramcount": SCOUTS_VALUE})
    assert not memory_only.as_scouts


def test_beside_a_scouts_valued_target_the_served_margin_is_the_whole_one():
    # Run time writes its scouts' value, so every applied task is re-measured
    # early: CPU time's price is judged, and served, on that margin (-0.005),
    # not on the one with only the scouts-valued tasks marked (0.22).
    early = {
        "walltime": {16.0: -0.05, SCOUTS_VALUE: 0.0},
        "cputime": {64.0: 0.22, SCOUTS_VALUE: -0.01},
    }
    whole = {"walltime": {16.0: -0.04}, "cputime": {64.0: -0.005}}
    nothing: dict[str, dict[float, float]] = {"walltime": {}, "cputime": {}}
    on = _sizing(True, early, {}, whole, nothing, list(early))
    assert on == ({"walltime": SCOUTS_VALUE, "cputime": 64.0}, (), -0.005)
    assert not on.as_scouts


def test_a_fixed_target_counts_its_fixed_margin_in_the_choice():
    margin = {"ramcount": {0.25: 0.1, SCOUTS_VALUE: 0.0}, "walltime": {4.0: 0.3}}
    kept = {"ramcount": {0.25: 0.2, SCOUTS_VALUE: 0.05}}
    nothing: dict[str, dict[float, float]] = {"ramcount": {}, "walltime": {}}
    chosen, fixed, worst = _sizing(False, margin, kept, {}, nothing, list(margin))
    assert chosen == {"ramcount": 0.25, "walltime": 4.0}
    assert fixed == ("ramcount",) and worst == 0.2


def test_auto_chooses_between_the_two_ways_choose_price_serves(tuned, labelled_history):
    frame = labelled_history.frame
    val = frame.iloc[-len(frame) // 10 :]
    prices = (1.0, 16.0)
    ways = {
        way: choose_price(tuned.bundle, val, frame, prices, early_remeasure=way)
        for way in (False, True, AUTO)
    }
    cost, info = ways[AUTO]
    asked = info["early_remeasure_chosen"]
    # Each way's candidates are replayed and chosen as when asked for alone.
    for way in (False, True):
        assert asked["margin_at"][str(way)] == ways[way][1]["margin_at"]
        assert asked["chosen"][str(way)] == ways[way][1]["chosen"]
    served = asked["served_margin"]
    fixed = ways[True][1]["fixed_targets"]
    remeasured = [c for t, c in asked["chosen"]["True"].items() if t not in fixed]
    assert asked["as_scouts"]["True"] == (
        bool(remeasured) and all(c == SCOUTS_VALUE_LABEL for c in remeasured)
    )
    early = asked["as_scouts"]["True"] or served["True"] > served["False"]
    assert cost.early_remeasure is early and info["early_remeasure"] is early
    # What is served is that way's choice, as asked for alone.
    assert cost == ways[early][0]
    assert info["margin_at"] == ways[early][1]["margin_at"]
    assert info["chosen"] == ways[early][1]["chosen"]
    # The served margin is the worst chosen target's (a fixed one's as fixed).
    late = ways[False][1]
    by = {
        t: late["fixed_margin_at" if t in late["fixed_targets"] else "margin_at"][t]
        for t in late["chosen"]
    }
    assert served["False"] == min(by[t][c] for t, c in late["chosen"].items())


def test_auto_is_off_where_an_operator_sets_the_delay_price(tuned, labelled_history):
    # Nothing is tuned with a set price, so there is nothing to choose on.
    config = TrainingConfig(delay_price=2.0, early_remeasure=AUTO)
    frame = labelled_history.frame
    cost, info = _cost_settings(tuned.bundle, frame, np.arange(len(frame)), config)
    assert cost.early_remeasure is False and info["early_remeasure"] is False
    assert cost.delay_price == 2.0
    forced = dataclasses.replace(config, early_remeasure=True)
    assert _cost_settings(tuned.bundle, frame, np.arange(1), forced)[0].early_remeasure
