"""The champion gate: floors, replay goals, noise, and what it refuses.

The verdicts are pure (:func:`judge`); the promotions run against a real MLflow
store in a temporary folder.
"""

from __future__ import annotations

import json
import math

import pytest

from model_registry import tracking
from model_registry.gate import (
    HIGHER,
    LOWER,
    GateEvidence,
    GateThresholds,
    judge,
)
from model_registry.promotion import promote_if_not_worse
from model_registry.registry import (
    champion_version,
    get_version,
    register_bundle,
    set_alias,
)
from model_registry.tolerances import parse_tolerances
from panda_predictor.settings import load_settings
from tests.bundle_parts import make_bundle

pytestmark = pytest.mark.filterwarnings(
    "ignore:The ``noload`` loader strategy is deprecated:DeprecationWarning"
)

SERVED = "served.mean_accuracy"
COST, DELAY = "served.cost", "served.delay_share"
RAM_FAILED, RAM_WASTE = "served.ramcount.failed_jobs", "served.ramcount.wasted_hours"
#: A replay that meets every goal: cheaper than scouts, fewer failed jobs and less
#: waste than theirs, little delay.
REPLAY = {COST: 0.83, RAM_FAILED: 0.012, RAM_WASTE: 1.2, DELAY: 0.05}
GOOD = {
    "mean_accuracy": 0.80,
    SERVED: 0.82,
    "ramcount.tail_recall": 0.95,
    "ramcount.under_allocation": 0.03,
    "cputime.tail_recall": 0.93,
    **REPLAY,
}
#: Floors the GOOD bundle, as it serves, beats clearly.
FLOORS = {
    "majority": {SERVED: 0.55, "mean_accuracy": 0.55, "ramcount.tail_recall": 0.0},
    "best_recency": {SERVED: 0.70, "mean_accuracy": 0.70},
    "scouts": {COST: 1.42, RAM_FAILED: 0.02, RAM_WASTE: 1.5},
}
NO_TARGET = None


def evidence(
    challenger=GOOD,
    champion=GOOD,
    floors=FLOORS,
    noise=None,
    target=NO_TARGET,
    **kwargs,
):
    return GateEvidence(
        challenger=challenger,
        champion=champion,
        floors=floors,
        noise=noise or {},
        tail_recall_target=target,
        **kwargs,
    )


def verdict_of(verdicts, metric):
    return next(v for v in verdicts if v.metric == metric)


# --- verdicts -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("change", "passed"),
    [
        ({"mean_accuracy": 0.796}, True),
        ({"mean_accuracy": 0.79}, False),
        ({"ramcount.tail_recall": 0.941}, True),
        ({"ramcount.tail_recall": 0.93}, False),
        ({"ramcount.under_allocation": 0.034}, True),
        ({"ramcount.under_allocation": 0.04}, False),
        ({"cputime.tail_recall": None}, False),
        ({"cputime.tail_recall": float("nan")}, False),
    ],
    ids=[
        "accuracy-small-drop",
        "accuracy-big-drop",
        "recall-small-drop",
        "recall-big-drop",
        "under-small-rise",
        "under-big-rise",
        "metric-missing",
        "metric-nan",
    ],
)
def test_not_worse_than_the_champion_within_tolerance(change, passed):
    challenger = {k: v for k, v in {**GOOD, **change}.items() if v is not None}
    verdicts = judge(evidence(challenger), GateThresholds())
    assert {v.metric for v in verdicts} == set(GOOD)
    changed = verdict_of(verdicts, next(iter(change)))
    assert changed.passed_champion is passed
    assert changed.better == (LOWER if "under" in changed.metric else HIGHER)


@pytest.mark.parametrize(
    ("noise", "passed"),
    [(0.0, False), (0.014, False), (0.016, True)],
    ids=["no-noise", "drop-beyond-noise", "drop-within-noise"],
)
def test_a_drop_within_the_test_sets_noise_is_not_held_against_it(noise, passed):
    challenger = {**GOOD, "mean_accuracy": 0.78}  # 0.02 below, tolerance 0.005
    got = verdict_of(
        judge(
            evidence(challenger, noise={"champion": {"mean_accuracy": noise}}),
            GateThresholds(),
        ),
        "mean_accuracy",
    )
    assert got.passed_champion is passed
    assert got.champion_noise == noise
    assert math.isclose(got.worsening, 0.02)


@pytest.mark.parametrize(
    ("accuracy", "noise", "passed", "binding"),
    [
        (0.80, 0.02, True, "best_recency"),
        (0.71, 0.02, False, "best_recency"),  # ahead, but within the noise
        (0.69, 0.0, False, "best_recency"),
        (0.60, 0.0, False, "best_recency"),
    ],
    ids=["clear-lead", "lead-within-noise", "below-recency", "below-both"],
)
def test_the_challenger_must_beat_every_floor_beyond_noise(
    accuracy, noise, passed, binding
):
    challenger = {**GOOD, SERVED: accuracy}
    noises = {name: {SERVED: noise} for name in FLOORS}
    verdicts = judge(evidence(challenger, None, noise=noises), GateThresholds())
    got = verdict_of(verdicts, SERVED)
    assert (got.passed_floor, got.floor_name) == (passed, binding)
    assert got.floor == FLOORS[binding][SERVED]
    assert got.passed_champion is None  # no champion to compare with
    # The model alone is compared with the champion only, never with the floors.
    assert verdict_of(verdicts, "mean_accuracy").floor_name is None


@pytest.mark.parametrize(
    ("factor", "passed"),
    [(1.0, False), (0.0, True), (-1.0, True)],
    ids=["beyond-noise", "any-lead", "not-clearly-below"],
)
def test_floor_noise_factor_sets_the_lead_needed(factor, passed):
    challenger = {**GOOD, SERVED: 0.71}  # 0.01 ahead of best_recency
    noises = {name: {SERVED: 0.02} for name in FLOORS}
    got = verdict_of(
        judge(
            evidence(challenger, None, noise=noises),
            GateThresholds(floor_noise_factor=factor),
        ),
        SERVED,
    )
    assert got.passed_floor is passed


def test_no_floor_measured_fails():
    got = verdict_of(
        judge(evidence(champion=None, floors={}), GateThresholds()), SERVED
    )
    assert (got.passed_floor, got.floor_name) == (False, "none measured")


def test_tail_recall_is_judged_against_the_champion_only():
    # Far below the 0.95 the tail rules aim at: no floor refuses it any more.
    challenger = {**GOOD, "ramcount.tail_recall": 0.40}
    alone = judge(evidence(challenger, None, target=0.95), GateThresholds())
    got = verdict_of(alone, "ramcount.tail_recall")
    assert (got.passed, got.floor, got.floor_name) == (True, None, None)
    against = judge(evidence(challenger, GOOD, target=0.95), GateThresholds())
    assert verdict_of(against, "ramcount.tail_recall").passed_champion is False


@pytest.mark.parametrize(
    ("metric", "value", "noise", "passed", "goal"),
    [
        (COST, 1.40, 0.0, True, ("scouts", 1.42)),
        (COST, 1.45, 0.0, False, ("scouts", 1.42)),
        (COST, 1.45, 0.05, True, ("scouts", 1.42)),  # dearer only within noise
        (RAM_FAILED, 0.02, 0.0, True, ("scouts", 0.02)),
        (RAM_FAILED, 0.03, 0.0, False, ("scouts", 0.02)),
        (RAM_FAILED, 0.03, 0.011, True, ("scouts", 0.02)),
        (RAM_WASTE, 1.4, 0.0, True, ("scouts", 1.5)),
        (RAM_WASTE, 1.6, 0.05, False, ("scouts", 1.5)),
        (DELAY, 0.19, 0.0, True, ("max_delay_share", 0.2)),
        (DELAY, 0.35, 0.1, False, ("max_delay_share", 0.2)),
        (DELAY, None, 0.0, False, ("max_delay_share", 0.2)),
    ],
    ids=[
        "cost-below-scouts",
        "cost-above-scouts",
        "cost-above-within-noise",
        "failed-as-scouts",
        "failed-over-scouts",
        "failed-over-within-noise",
        "waste-below-scouts",
        "waste-over-beyond-noise",
        "delay-below",
        "delay-over-beyond-noise",
        "delay-missing",
    ],
)
def test_the_replay_must_meet_its_goals(metric, value, noise, passed, goal):
    challenger = {k: v for k, v in {**GOOD, metric: value}.items() if v is not None}
    reference = "challenger" if metric == DELAY else "scouts"
    verdicts = judge(
        evidence(challenger, None, noise={reference: {metric: noise}}),
        GateThresholds(),
    )
    got = verdict_of(verdicts, metric)
    assert (got.passed_floor, (got.floor_name, got.floor)) == (passed, goal)
    assert got.better == LOWER and got.passed_champion is None
    others = [v for v in verdicts if v.metric != metric]
    assert all(v.passed for v in others)


def test_the_goals_follow_the_thresholds():
    challenger = {**GOOD, DELAY: 0.3}
    strict = judge(evidence(challenger, None), GateThresholds())
    assert not verdict_of(strict, DELAY).passed
    # The command line's names, then the settings', reach the same fields.
    by_name = GateThresholds(**parse_tolerances(["delay_share=0.5"]))
    by_settings = GateThresholds.from_settings(load_settings(gate_max_delay_share=0.5))
    assert by_name == by_settings
    loose = judge(evidence(challenger, None), by_name)
    assert verdict_of(loose, DELAY).passed


def test_the_waste_tolerance_allows_a_share_more_than_the_scouts():
    challenger = {**GOOD, RAM_WASTE: 2.4}  # scouts 1.5: 1.6 times theirs
    strict = verdict_of(judge(evidence(challenger, None), GateThresholds()), RAM_WASTE)
    assert not strict.passed
    by_name = GateThresholds(**parse_tolerances(["waste=0.5"]))
    assert by_name == GateThresholds.from_settings(
        load_settings(gate_max_waste_rise=0.5)
    )
    loose = verdict_of(judge(evidence(challenger, None), by_name), RAM_WASTE)
    assert not loose.passed  # 2.4 > 1.5 x 1.5 = 2.25
    wide = GateThresholds(max_waste_rise=0.7)
    got = verdict_of(judge(evidence(challenger, None), wide), RAM_WASTE)
    assert got.passed and (got.floor_name, got.floor) == ("scouts x 1.7", 1.5 * 1.7)
    # The tolerance is for waste only: failed jobs stay at most the scouts'.
    failing = {**GOOD, RAM_FAILED: 0.03}
    got = verdict_of(judge(evidence(failing, None), wide), RAM_FAILED)
    assert not got.passed


def test_a_target_without_the_scouts_figure_fails():
    floors = {**FLOORS, "scouts": {COST: 1.42, RAM_FAILED: 0.02}}
    verdicts = judge(evidence(champion=None, floors=floors), GateThresholds())
    got = verdict_of(verdicts, RAM_WASTE)
    assert (got.passed_floor, got.floor_name) == (False, "none measured")


def test_no_scouts_cost_measured_fails():
    floors = {k: v for k, v in FLOORS.items() if k != "scouts"}
    verdicts = judge(evidence(champion=None, floors=floors), GateThresholds())
    got = verdict_of(verdicts, COST)
    assert (got.passed_floor, got.floor_name) == (False, "none measured")


def test_the_reason_states_the_goals_met_or_missed(reg_settings, tmp_path):
    v1 = register(reg_settings, tmp_path, "one")
    first = promote_if_not_worse(reg_settings, v1, evidence(champion=None))
    assert first.promoted
    assert "replay goals met: served.cost 0.8300 <= scouts 1.4200" in first.reason
    assert "served.delay_share 0.0500 <= max_delay_share 0.2000" in first.reason
    v2 = register(reg_settings, tmp_path, "two")
    dear = {**GOOD, COST: 1.60}
    noise = {"scouts": {COST: 0.05}}
    refused = promote_if_not_worse(reg_settings, v2, evidence(dear, GOOD, noise=noise))
    assert not refused.promoted
    assert refused.reason == (
        "replay goals missed: served.cost 1.6000 > scouts 1.4200 + noise 0.0500"
    )
    row = next(line for line in refused.table() if line.startswith(COST))
    assert row.split()[-5:] == ["<=", "scouts", "1.4200", "OVER", "GOAL"]


def test_verdict_line_names_champion_challenger_floor_tolerance_and_noise():
    noise = {"champion": {SERVED: 0.01}, "best_recency": {SERVED: 0.02}}
    line = verdict_of(judge(evidence(noise=noise), GateThresholds()), SERVED).describe()
    assert line == (
        "served.mean_accuracy: ok challenger=0.8200 champion=0.8200 (ok; tolerance "
        "0.0050 + noise 0.0100) floor best_recency=0.7000 (ok; noise 0.0200) higher "
        "is better"
    )


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"max_accuracy_drop": -0.1}, "'max_accuracy_drop'"),
        ({"max_tail_recall_drop": "x"}, "'max_tail_recall_drop'"),
        ({"max_delay_share": True}, "'max_delay_share'"),
    ],
    ids=["negative", "not-a-number", "bool"],
)
def test_thresholds_refuse_bad_values(kwargs, match):
    with pytest.raises(ValueError, match=match):
        GateThresholds(**kwargs)


# --- promotions on a real store -------------------------------------------------


def register(settings, tmp_path, marker) -> int:
    folder = make_bundle(tmp_path / marker, marker)
    return register_bundle(settings, folder, None, GOOD).version


def alias_version(settings, alias):
    client = tracking.mlflow_client(settings)
    return int(client.get_model_version_by_alias(settings.model_name, alias).version)


def test_the_first_model_needs_something_to_beat(reg_settings, tmp_path):
    v1 = register(reg_settings, tmp_path, "one")
    nothing = promote_if_not_worse(reg_settings, v1, evidence(champion=None, floors={}))
    assert (nothing.promoted, nothing.alias) == (False, "challenger")
    assert "below its floor on served.mean_accuracy" in nothing.reason
    assert champion_version(reg_settings) is None

    v2 = register(reg_settings, tmp_path, "two")
    first = promote_if_not_worse(reg_settings, v2, evidence(champion=None))
    assert (first.promoted, first.alias) == (True, "champion")
    assert first.reason.startswith("first model: above the floor on 1 metrics")
    assert champion_version(reg_settings).version == v2


def test_promotes_the_better_and_keeps_the_worse_as_challenger(reg_settings, tmp_path):
    v1 = register(reg_settings, tmp_path, "one")
    promote_if_not_worse(reg_settings, v1, evidence(champion=None))
    better = {**GOOD, "mean_accuracy": 0.85}
    v2 = register(reg_settings, tmp_path, "two")
    second = promote_if_not_worse(reg_settings, v2, evidence(better, GOOD))
    assert (second.promoted, second.champion_version) == (True, v1)
    assert (
        alias_version(reg_settings, "champion"),
        alias_version(reg_settings, "previous"),
    ) == (v2, v1)

    worse = {**better, "ramcount.tail_recall": 0.90}
    v3 = register(reg_settings, tmp_path, "three")
    third = promote_if_not_worse(reg_settings, v3, evidence(worse, better))
    assert (third.promoted, third.alias) == (False, "challenger")
    assert third.reason == "worse than champion on ramcount.tail_recall"
    assert alias_version(reg_settings, "champion") == v2
    tags = get_version(reg_settings, v3).tags
    assert tags["gate.decision"] == "challenger"
    assert tags["gate.against_version"] == str(v2)
    assert tags["gate.ramcount.tail_recall"].startswith(
        "ramcount.tail_recall: FAILED challenger=0.9000 champion=0.9500 (worse;"
    )
    assert "floor best_recency=0.7000" in tags["gate.served.mean_accuracy"]
    assert json.loads(tags["gate.thresholds"])["max_tail_recall_drop"] == 0.01

    # Promoting the challenger by hand moves the alias off it.
    set_alias(reg_settings, v3, "champion")
    assert set(get_version(reg_settings, v3).aliases) == {"champion"}


def test_an_incomparable_challenger_is_not_promoted_by_default(reg_settings, tmp_path):
    v1 = register(reg_settings, tmp_path, "one")
    promote_if_not_worse(reg_settings, v1, evidence(champion=None))
    v2 = register(reg_settings, tmp_path, "two")
    bins = "other class edges for ramcount"
    held = promote_if_not_worse(
        reg_settings, v2, evidence(champion=None, incomparable=bins)
    )
    assert (held.promoted, held.alias) == (False, "challenger")
    assert held.reason.startswith(f"incomparable ({bins}): not promoted by default")
    assert alias_version(reg_settings, "champion") == v1

    asked = promote_if_not_worse(
        reg_settings,
        v2,
        evidence(champion=None, incomparable=bins),
        promote_incomparable=True,
    )
    assert (asked.promoted, alias_version(reg_settings, "champion")) == (True, v2)

    # Even when asked, an incomparable challenger must beat its floors.
    v3 = register(reg_settings, tmp_path, "three")
    weak = {**GOOD, SERVED: 0.6}
    refused = promote_if_not_worse(
        reg_settings,
        v3,
        evidence(weak, None, incomparable=bins),
        promote_incomparable=True,
    )
    assert (refused.promoted, alias_version(reg_settings, "champion")) == (False, v2)


def test_a_model_that_could_not_be_scored_promotes_nothing(reg_settings, tmp_path):
    v1 = register(reg_settings, tmp_path, "one")
    promote_if_not_worse(reg_settings, v1, evidence(champion=None))
    v2 = register(reg_settings, tmp_path, "two")
    failure = "the champion could not be scored (ValueError: unknown feature)"
    got = promote_if_not_worse(
        reg_settings,
        v2,
        evidence({**GOOD, "mean_accuracy": 0.99}, None, unscored=failure),
        promote_incomparable=True,
    )
    assert (got.promoted, got.alias, got.verdicts) == (False, "challenger", ())
    assert got.reason == f"not promoted: {failure}"
    assert alias_version(reg_settings, "champion") == v1
    assert get_version(reg_settings, v2).tags["gate.reason"] == got.reason


def test_plain_metrics_are_refused_as_evidence(reg_settings):
    with pytest.raises(TypeError, match="must be a GateEvidence.*Got dict instead"):
        promote_if_not_worse(reg_settings, 1, GOOD)
