"""The champion gate: floors, the tail recall target, noise, and what it refuses.

The verdicts are pure (:func:`judge`); the promotions run against a real MLflow
store in a temporary folder.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from model_registry import tracking
from model_registry.gate import (
    HIGHER,
    LOWER,
    GateEvidence,
    GateThresholds,
    judge,
    promote_if_not_worse,
)
from model_registry.registry import (
    champion_version,
    get_version,
    register_bundle,
    set_alias,
)

pytestmark = pytest.mark.filterwarnings(
    "ignore:The ``noload`` loader strategy is deprecated:DeprecationWarning"
)

SERVED = "served.mean_accuracy"
GOOD = {
    "mean_accuracy": 0.80,
    SERVED: 0.82,
    "ramcount.tail_recall": 0.95,
    "ramcount.under_allocation": 0.03,
    "cputime.tail_recall": 0.93,
}
#: Floors the GOOD bundle, as it serves, beats clearly.
FLOORS = {
    "majority": {SERVED: 0.55, "mean_accuracy": 0.55, "ramcount.tail_recall": 0.0},
    "best_recency": {SERVED: 0.70, "mean_accuracy": 0.70},
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


@pytest.mark.parametrize(
    ("recall", "noise", "passed"),
    [
        (0.92, 0.0, True),  # within the 0.05 shortfall of 0.95
        (0.88, 0.03, True),  # below 0.90, within the noise
        (0.85, 0.03, False),
        (0.0, float("inf"), True),  # no task of the largest class: cannot judge
    ],
    ids=["above-floor", "within-noise", "below", "unjudgeable"],
)
def test_tail_recall_must_keep_its_target(recall, noise, passed):
    challenger = {**GOOD, "ramcount.tail_recall": recall}
    got = verdict_of(
        judge(
            evidence(
                challenger,
                None,
                noise={"challenger": {"ramcount.tail_recall": noise}},
                target=0.95,
            ),
            GateThresholds(),
        ),
        "ramcount.tail_recall",
    )
    assert got.passed_floor is passed
    assert math.isclose(got.floor, 0.90)


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
        ({"max_tail_recall_shortfall": True}, "'max_tail_recall_shortfall'"),
    ],
    ids=["negative", "not-a-number", "bool"],
)
def test_thresholds_refuse_bad_values(kwargs, match):
    with pytest.raises(ValueError, match=match):
        GateThresholds(**kwargs)


# --- promotions on a real store -------------------------------------------------


def make_bundle(folder: Path, marker: str) -> Path:
    (folder / "models").mkdir(parents=True)
    manifest = {"schema_hash": "h1", "bins_version": "bins-1", "marker": marker}
    (folder / "bundle.json").write_text(json.dumps(manifest))
    (folder / "models" / "ramcount.json").write_text(f'{{"m": "{marker}"}}')
    return folder


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
