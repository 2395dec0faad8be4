"""The pure drift measures: PSI, profiles, feature, class and performance drift."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from panda_predictor.core.assess.drift import (
    DriftThresholds,
    build_profile,
    class_drift,
    expected_psi,
    feature_drift,
    psi,
)
from panda_predictor.core.assess.drift_verdict import DriftResult, performance_drift


def _tasks(
    rng,
    n,
    releases=("Athena-24.0.5", "Athena-24.0.30"),
    ptypes=("simul", "reco"),
    events=1e5,
):
    return pd.DataFrame(
        {
            "jeditaskid": np.arange(n),
            "processingtype": rng.choice(ptypes, n),
            "prodsourcelabel": "managed",
            "transhome": rng.choice(releases, n),
            "transpath": "Sim_tf.py",
            "architecture": "x86_64-el9",
            "campaign": "mc23",
            "workinggroup": "AP_MCGN",
            "corecount": rng.choice([1, 8], n),
            "n_input_datasets": 1,
            "nfiles_sum": rng.integers(1, 100, n).astype(float),
            "nevents_sum": rng.lognormal(np.log(events), 0.5, n),
        }
    )


def test_psi_is_zero_for_equal_shares_and_grows_with_shift():
    assert psi([0.5, 0.5], [0.5, 0.5]) == pytest.approx(0.0)
    small, large = psi([0.5, 0.5], [0.45, 0.55]), psi([0.5, 0.5], [0.1, 0.9])
    assert 0 < small < 0.05 < 0.2 < large
    # An empty bin stays finite.
    assert math.isfinite(psi([1.0, 0.0], [0.0, 1.0]))


def test_expected_psi_shrinks_with_more_tasks():
    assert expected_psi(10, 100, 10_000) == pytest.approx(9 * (0.01 + 0.0001))
    assert expected_psi(10, 10_000, 10_000) < expected_psi(10, 100, 10_000)
    assert expected_psi(1, 100, 100) == 0.0


def test_same_population_does_not_drift(seed):
    rng = np.random.default_rng(seed)
    profile = build_profile(_tasks(rng, 5000))
    result = feature_drift(profile, _tasks(rng, 500))
    assert not any(f.drifted for f in result), [f for f in result if f.drifted]
    assert all(f.unseen_share == 0 for f in result)


def test_new_release_and_shifted_numerics_drift(seed):
    rng = np.random.default_rng(seed)
    profile = build_profile(_tasks(rng, 5000))
    recent = _tasks(rng, 500, releases=("Athena-24.0.30", "Athena-25.0.99"), events=1e7)
    found = {f.feature: f for f in feature_drift(profile, recent)}
    assert found["transhome"].drifted and found["transhome"].unseen_share > 0.3
    assert found["nevents_sum"].drifted and found["nevents_sum"].psi > 1
    assert not found["processingtype"].drifted


def test_release_turnover_alone_is_not_drift(seed):
    # Only the mix of known releases changed: PSI of transhome is high, but it is
    # not an alarm feature; nothing unseen.
    rng = np.random.default_rng(seed)
    profile = build_profile(_tasks(rng, 5000))
    recent = _tasks(rng, 500, releases=("Athena-24.0.30",))
    found = {f.feature: f for f in feature_drift(profile, recent)}
    assert found["transhome"].psi > 0.2
    assert not found["transhome"].drifted


def test_class_drift_and_profile_round_trip(seed):
    rng = np.random.default_rng(seed)
    predicted = {"ramcount": rng.integers(0, 4, 1000)}
    profile = build_profile(_tasks(rng, 100), predicted, {"ramcount": 5})
    assert len(profile["predicted_classes"]["ramcount"]) == 5
    same = class_drift(profile, {"ramcount": rng.integers(0, 4, 1000)})
    moved = class_drift(profile, {"ramcount": np.full(1000, 4)})
    assert same["ramcount"] < 0.05 < 0.2 < moved["ramcount"]


def test_performance_drift_rules():
    test = {
        "ramcount.accuracy": 0.8,
        "ramcount.under_allocation": 0.05,
        "cputime.accuracy": 0.7,
        "cputime.under_allocation": 0.1,
    }
    scores = {
        "ramcount": {"n": 100, "accuracy": 0.78, "under_allocation": 0.12},
        "cputime": {"n": 100, "accuracy": 0.5, "under_allocation": 0.1},
    }
    result = {p.target: p for p in performance_drift(scores, test)}
    assert (
        result["ramcount"].drifted and "under-allocation" in result["ramcount"].reason
    )
    assert result["cputime"].drifted and "accuracy" in result["cputime"].reason
    few = performance_drift({"ramcount": {**scores["ramcount"], "n": 10}}, test)
    assert not few[0].drifted
    verdict = DriftResult(n_tasks=0, performance=list(result.values()))
    assert verdict.drifted and len(verdict.reasons) == 2
    assert verdict.to_dict()["drifted"] is True


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"psi": 0}, "'psi' field must be a positive number. Got 0"),
        ({"under_allocation_factor": -1}, "'under_allocation_factor'.*Got -1"),
        ({"min_tasks": 0}, "'min_tasks' field must be a positive integer. Got 0"),
    ],
    ids=["psi-zero", "factor-negative", "min-tasks-zero"],
)
def test_threshold_errors(kwargs, match):
    with pytest.raises(ValueError, match=match):
        DriftThresholds(**kwargs)


@pytest.mark.parametrize(
    ("call", "match"),
    [
        (lambda: psi([0.5, 0.5], [1.0]), "same length. Got 2 and 1"),
        (lambda: build_profile(pd.DataFrame({"x": [1]})), "must have the columns"),
        (
            lambda: feature_drift({"format": 99}, pd.DataFrame()),
            "format must be 1. Got 99",
        ),
    ],
    ids=["psi-lengths", "profile-columns", "profile-format"],
)
def test_input_errors(call, match):
    with pytest.raises(ValueError, match=match):
        call()
