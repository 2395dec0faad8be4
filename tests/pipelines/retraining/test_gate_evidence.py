"""What the gate is given: served classes, replay, floors and noise on one test set.

The bootstrap and the floors are checked on hand-made arrays, the replay's costs on
hand-made tasks priced by a real bundle; the whole evidence on a real small
training run and a real MLflow store (a champion that scores, one with other bins,
one that cannot be loaded).
"""

from __future__ import annotations

import shutil
from dataclasses import replace

import numpy as np
import pandas as pd
import pytest

from model_registry.gate import (
    SCOUTS,
    SERVED_ACCURACY,
    SERVED_COST,
    SERVED_DELAY,
    GateThresholds,
    failed_jobs_metric,
    wasted_hours_metric,
)
from model_registry.promotion import promote_if_not_worse
from model_registry.registry import register_bundle, set_alias
from panda_predictor.bins_file import load_bins
from panda_predictor.core.assess.day_bootstrap import DayBootstrap
from panda_predictor.core.bins import BinSet
from panda_predictor.core.decide.cost_choice import DEFAULT_RAM_MB_PER_CORE
from panda_predictor.core.decide.scout_policy import APPLIED, KEPT_SCOUTS
from panda_predictor.core.domain.memory_steps import MEMORY_STEPS_MB
from panda_predictor.serving.bundle import save_bundle
from panda_predictor.serving.classified import Classified
from panda_predictor.serving.predictor import Predictor
from pipelines.retraining.gate_evidence import (
    BEST_RECENCY,
    MAJORITY,
    _metric_parts,
    best_recency_classes,
    gate_evidence,
    majority_classes,
    metrics_of,
    noise_between,
)
from pipelines.training.config import TrainingConfig
from pipelines.training.served_replay import (
    labelled_parts,
    replay_bursts,
    replay_decision,
)
from pipelines.training.train import train

pytestmark = pytest.mark.filterwarnings(
    "ignore:The ``noload`` loader strategy is deprecated:DeprecationWarning"
)

BINS = load_bins()
TARGETS = ("ramcount", "cputime", "iointensity", "walltime")
PRICED = ("ramcount", "cputime", "walltime")


def random_case(seed: int, n: int = 300, n_days: int = 30):
    rng = np.random.default_rng(seed)
    y = {t: rng.integers(0, BINS[t].n_classes, n) for t in TARGETS}
    pred = {t: np.where(rng.random(n) < 0.7, y[t], rng.integers(0, 2, n)) for t in y}
    days = rng.integers(0, n_days, n)
    return y, pred, days


def test_resampling_every_day_once_gives_the_point_metrics():
    y, pred, days = random_case(1)
    boot = DayBootstrap(days, n_resamples=2)
    boot.counts = np.ones((1, boot.n_days))
    expected = metrics_of(y, pred, BINS)
    for metric, (num, den) in _metric_parts(y, pred, BINS).items():
        assert boot.resampled(num, den)[0] == pytest.approx(expected[metric]), metric


def test_noise_is_zero_against_itself_and_positive_against_another():
    y, pred, days = random_case(2)
    parts = _metric_parts(y, pred, BINS)
    boot = DayBootstrap(days)
    assert set(noise_between(boot, parts, parts).values()) == {0.0}
    other = _metric_parts(y, majority_classes(y), BINS)
    noise = noise_between(boot, parts, other)
    assert 0.01 < noise["mean_accuracy"] < 0.2


def test_days_are_resampled_whole():
    y, pred, _ = random_case(3)
    one_day = DayBootstrap(np.zeros(300, dtype=int))
    noise = noise_between(one_day, _metric_parts(y, pred, BINS), None)
    # One day resampled is always that day: no spread at all.
    assert noise["mean_accuracy"] == 0.0


def test_a_metric_without_its_tasks_has_infinite_noise():
    y, pred, days = random_case(4)
    y["ramcount"] = np.zeros_like(y["ramcount"])  # no task in the largest class
    noise = noise_between(DayBootstrap(days), _metric_parts(y, pred, BINS), None)
    assert noise["ramcount.tail_recall"] == float("inf")
    assert np.isfinite(noise["cputime.tail_recall"])


def test_best_recency_rule_is_chosen_per_target_with_majority_fallback():
    truth_values = np.array([1000.0, 2000.0, 3000.0, 5000.0, 5000.0])
    y = {"ramcount": BINS["ramcount"].assign(truth_values)}
    features = pd.DataFrame(
        {
            # The user's last two: always one class low.
            "hist_user_ramcount_mean2": truth_values / 1.7,
            # The key's p75 (plus the 10 % margin): right, except one unknown task.
            "hist_user_transformation_ramcount_p75": [
                900.0,
                1800.0,
                2700,
                np.nan,
                4500,
            ],
            "hist_user_ramcount_p75": [np.nan] * 5,
        }
    )
    majority = majority_classes(y)
    classes, names = best_recency_classes(features, y, BINS, majority)
    assert names == {"ramcount": "key_p75"}
    assert list(classes["ramcount"]) == [0, 1, 2, majority["ramcount"][3], 3]


# --- on a real training run and registry -------------------------------------------


@pytest.fixture(scope="module")
def small_run(labelled_history):
    config = TrainingConfig(model_kinds=("xgboost",), xgboost={"n_estimators": 30})
    return train(labelled_history, BINS, config)


def publish(settings, bundle, folder) -> int:
    saved = save_bundle(bundle, folder)
    info = register_bundle(settings, saved, None, {"mean_accuracy": 0.5})
    set_alias(settings, info.version, "champion")
    return info.version


def test_evidence_without_champion_has_floors_and_noise(
    reg_settings, small_run, labelled_history
):
    got = gate_evidence(reg_settings, small_run, labelled_history, 0.95)
    assert got.champion is None and got.unscored is None and got.incomparable is None
    assert set(got.floors) == {MAJORITY, BEST_RECENCY, SCOUTS}
    assert set(got.noise) == {"challenger", MAJORITY, BEST_RECENCY, SCOUTS}
    majority = got.floors[MAJORITY]
    for target in TARGETS:
        # Majority is one constant class: its accuracy is that class's test share.
        share = np.bincount(small_run.y_test[target]).max() / len(
            small_run.y_test[target]
        )
        assert majority[f"{target}.accuracy"] == pytest.approx(share)
    # The challenger is scored as a model, as its registered metrics describe it,
    # and as it serves (with its combination), which is what the floors judge.
    # (The calibration errors are the bundle's own record, not a gate metric.)
    model = {k: v for k, v in got.challenger.items() if not k.startswith("served.")}
    registered = {k: v for k, v in small_run.bundle.metrics.items() if "ece" not in k}
    assert model == pytest.approx(registered)
    assert got.challenger[SERVED_ACCURACY] > majority[SERVED_ACCURACY]
    for floor in (MAJORITY, BEST_RECENCY):
        assert got.floors[floor][SERVED_ACCURACY] == got.floors[floor]["mean_accuracy"]
        assert 0 < got.noise[floor][SERVED_ACCURACY] < 0.2
    assert got.tail_recall_target == 0.95


def test_replay_prices_written_values_and_scouts_by_the_true_use(small_run):
    predictor = Predictor(small_run.bundle, "test", "0")
    cost = predictor.policy.settings
    delay, gb = cost.delay_price, cost.gb_per_core * 1024
    # Each target's failures are priced at its own tuned delay price.
    own = {t: predictor.policy.choosers[t].settings for t in PRICED}
    tasks = pd.DataFrame(
        {
            "ramcount": [2500.0, 1500.0, 3000.0],
            "cputime": [50.0] * 3,
            "walltime": [20.0] * 3,
            "iointensity": [100.0] * 3,
        }
    )
    # Only the third task asks for memory (4000 MB per core): its scouts do too.
    requests = pd.DataFrame({"requested_ramcount": [np.nan, np.nan, 4000.0]})
    parts = Classified(requests, {}, {}, {t: np.zeros(3, int) for t in TARGETS}, {}, {})
    decided = {
        "decision": np.array([APPLIED, APPLIED, KEPT_SCOUTS], dtype=object),
        "ramcount_value": np.array([3000.0, 1000.0, 3000.0]),
        "cputime_value": np.array([100.0] * 3),
        "walltime_value": np.array([100.0, 10.0, 100.0]),
        "iointensity_value": np.array([500.0] * 3),
    }
    got = replay_decision(predictor, parts, decided, tasks)

    cpu, wall = (100 - 50) / 50, (100 - 20) / 20  # spare time, in job runs
    assert MEMORY_STEPS_MB[1] == 2000.0  # the retry of a 1000 MB attempt
    # Task 1: memory fails once (one run lost and delayed, a requeue), then fits
    # at 2000; walltime fails once at 10 (half a run, delayed), then fits at 100.
    ram, time = own["ramcount"], own["walltime"]
    memory_retry = (1 + ram.delay_price) * 1.0 + (2000 - 1500) / gb + ram.failure_cost
    wall_retry = (1 + time.delay_price) * 10 / 20 + wall + time.failure_cost
    # Scouts ask for the request, else (time) the top class's value and (memory)
    # the queue's default, 2000 MB per core; the bulk waits. Task 1 uses 2500:
    # its scout fails at 2000, as above, and fits at PanDA's next step, 3000.
    top = {t: BINS[t].values[-1] for t in PRICED}
    assert DEFAULT_RAM_MB_PER_CORE == 2000.0
    scout_time = (top["cputime"] - 50) / 50 + (top["walltime"] - 20) / 20
    scout_memory_retry = (1 + ram.delay_price) * 1.0 + (3000 - 2500) / gb
    scouts = [
        delay + scout_memory_retry + ram.failure_cost + scout_time,
        delay + (2000 - 1500) / gb + scout_time,
        delay + (4000 - 3000) / gb + scout_time,
    ]
    assert got.scouts_cost == pytest.approx(scouts)
    assert got.cost == pytest.approx(
        [(3000 - 2500) / gb + cpu + wall, memory_retry + cpu + wall_retry, scouts[2]]
    )
    assert list(got.applied) == [True, True, False]


def test_evidence_replays_the_served_decision_on_the_test_tasks(
    reg_settings, small_run, labelled_history
):
    got = gate_evidence(reg_settings, small_run, labelled_history, 0.95)
    predictor = Predictor(small_run.bundle, "test", "0")
    tasks = small_run.test_tasks
    parts = labelled_parts(predictor, tasks, labelled_history.history)
    decided = predictor.decide(parts, predictor.in_domain(tasks))
    replay = replay_decision(predictor, parts, decided, tasks)

    assert got.challenger[SERVED_COST] == pytest.approx(replay.cost.mean())
    assert got.floors[SCOUTS][SERVED_COST] == pytest.approx(replay.scouts_cost.mean())
    assert got.challenger[SERVED_DELAY] == pytest.approx(1 - replay.applied.mean())
    # The replay goals: per priced target, the tasks replayed as the jobs of
    # bursts under PanDA's rules, the decision's row against the scouts'.
    bursts = replay_bursts(predictor, parts, decided, tasks)
    assert set(bursts.known) == set(PRICED)  # iointensity is not priced
    for t in PRICED:
        known = np.isfinite(tasks[t].to_numpy(float))
        assert (bursts.known[t] == known).all()
        for side, outcome in (
            (got.challenger, bursts.served[t]),
            (got.floors[SCOUTS], bursts.scouts[t]),
        ):
            assert side[failed_jobs_metric(t)] == pytest.approx(outcome.failed.mean())
            assert side[wasted_hours_metric(t)] == pytest.approx(
                outcome.wasted_hours.mean()
            )
        assert np.isfinite(got.noise[SCOUTS][failed_jobs_metric(t)])
    assert failed_jobs_metric("iointensity") not in got.challenger
    assert np.isfinite(got.noise[SCOUTS][SERVED_COST])
    assert 0 <= got.noise["challenger"][SERVED_DELAY] < 1

    # By hand, on a few applied tasks whose values were all enough: what they
    # wrote beyond their use, in job runs; and what their scouts would waste.
    gb = predictor.policy.settings.gb_per_core * 1024
    checked = 0
    for i in np.flatnonzero(replay.applied):
        use = {t: float(tasks[t].iloc[i]) for t in PRICED}
        written = {t: float(decided[f"{t}_value"][i]) for t in PRICED}
        request = {t: float(parts.features[f"requested_{t}"].iloc[i]) for t in PRICED}
        default = {
            t: request[t]
            if request[t] > 0
            else (DEFAULT_RAM_MB_PER_CORE if t == "ramcount" else BINS[t].values[-1])
            for t in PRICED
        }
        if any(written[t] < use[t] or default[t] < use[t] for t in PRICED):
            continue

        def spare(value, use=use):
            ram = (value["ramcount"] - use["ramcount"]) / gb
            time = [(value[t] - use[t]) / max(use[t], 1.0) for t in PRICED[1:]]
            return ram + sum(time)

        assert replay.cost[i] == pytest.approx(spare(written)), i
        delay = predictor.policy.settings.delay_price
        assert replay.scouts_cost[i] == pytest.approx(delay + spare(default)), i
        checked += 1
        if checked == 5:
            break
    assert checked == 5


def test_the_same_bundle_as_champion_ties_with_zero_noise(
    reg_settings, small_run, labelled_history, tmp_path
):
    publish(reg_settings, small_run.bundle, tmp_path / "bundle")
    got = gate_evidence(reg_settings, small_run, labelled_history, 0.95)
    model = {k: v for k, v in got.challenger.items() if not k.startswith("served.")}
    assert got.champion == pytest.approx(model)
    assert set(got.noise["champion"].values()) <= {0.0, float("inf")}


def test_a_champion_with_other_bins_is_incomparable(
    reg_settings, small_run, labelled_history, tmp_path
):
    # Same number of classes, other edges: the champion loads and could predict,
    # but its classes mean other ranges than the test labels.
    ram = replace(
        BINS["ramcount"],
        edges=(1000.0, 2000.0, 5000.0),
        values=(1000.0, 2000.0, 5000.0, 8000.0),
        labels=(),
    )
    other = BinSet("other-1", {**BINS.targets, "ramcount": ram})
    publish(reg_settings, replace(small_run.bundle, bins=other), tmp_path / "b")
    got = gate_evidence(reg_settings, small_run, labelled_history, 0.95)
    assert got.champion is None and got.unscored is None
    assert got.incomparable == "other class edges for ramcount"


def test_a_champion_that_cannot_be_loaded_promotes_nothing(
    reg_settings, small_run, labelled_history, tmp_path
):
    saved = save_bundle(small_run.bundle, tmp_path / "good")
    broken = tmp_path / "broken"
    shutil.copytree(saved, broken)
    text = (
        (broken / "bins.yaml").read_text().replace("version: default-1", "version: x")
    )
    (broken / "bins.yaml").write_text(text)
    info = register_bundle(reg_settings, broken, None, {"mean_accuracy": 0.5})
    set_alias(reg_settings, info.version, "champion")

    got = gate_evidence(reg_settings, small_run, labelled_history, 0.95)
    assert got.unscored.startswith("the champion could not be loaded (BundleError:")
    new = register_bundle(reg_settings, saved, None, {"mean_accuracy": 0.9})
    decision = promote_if_not_worse(
        reg_settings,
        new.version,
        got,
        GateThresholds(floor_noise_factor=-1.0),
        promote_incomparable=True,
    )
    assert (decision.promoted, decision.alias) == (False, "challenger")
    assert "could not be loaded" in decision.reason
