"""Drift verdicts that do not contradict themselves: thresholds, can-alarm, too few."""

from __future__ import annotations

import numpy as np
import pytest

from panda_predictor.cli.drift import drift_lines
from panda_predictor.core.assess.drift import (
    DriftThresholds,
    build_profile,
    feature_drift,
)
from panda_predictor.core.assess.drift_verdict import (
    DRIFT,
    NO_DRIFT,
    TOO_FEW_OUTCOMES,
    DriftResult,
    performance_drift,
)
from tests.core.assess.test_drift import _tasks

#: Near the issue's case: test under-allocation 0.23, feedback 0.40, and accuracy
#: fallen by 0.30 (more than the 0.15 drop): drift on 50 outcomes, no verdict on 40.
TEST = {"ramcount.accuracy": 0.80, "ramcount.under_allocation": 0.23}
BAD = {"accuracy": 0.50, "under_allocation": 0.40}


def result_with_outcomes(n: int, enough_tasks: bool = True) -> DriftResult:
    performance = performance_drift({"ramcount": {**BAD, "n": n}}, TEST)
    return DriftResult(
        n_tasks=500 if enough_tasks else 10,
        performance=performance,
        enough_tasks=enough_tasks,
        min_outcomes=DriftThresholds().min_tasks,
    )


def test_below_the_minimum_the_outcomes_give_no_verdict():
    result = result_with_outcomes(40)
    assert result.verdict == TOO_FEW_OUTCOMES
    assert result.outcome_verdict == TOO_FEW_OUTCOMES
    assert not result.drifted
    assert result.performance[0].reason == (
        "too few outcomes for a verdict (40 scored, minimum 50)"
    )
    text = "\n".join(drift_lines(result))
    assert "too few outcomes for a verdict (40 scored, minimum 50)" in text
    assert "Verdict: too_few_outcomes" in text
    assert "Outcomes: no drift" not in text and "No drift detected" not in text


def test_at_the_minimum_the_same_outcomes_are_drift():
    result = result_with_outcomes(50)
    assert result.verdict == DRIFT and result.outcome_verdict == DRIFT
    assert "accuracy 0.500 < test 0.800" in result.reasons[0]
    assert result.under_allocation == {"ramcount": pytest.approx(0.40)}


def test_no_feedback_at_all_is_too_few_outcomes_not_no_drift():
    result = DriftResult(n_tasks=500, min_outcomes=50)
    assert (result.task_verdict, result.outcome_verdict) == (
        NO_DRIFT,
        TOO_FEW_OUTCOMES,
    )
    assert result.verdict == TOO_FEW_OUTCOMES and result.n_outcomes == 0


def test_enough_good_outcomes_and_stable_tasks_are_no_drift():
    good = {"accuracy": 0.79, "under_allocation": 0.25}
    performance = performance_drift({"ramcount": {**good, "n": 200}}, TEST)
    result = DriftResult(n_tasks=500, performance=performance, min_outcomes=50)
    assert result.verdict == NO_DRIFT
    assert drift_lines(result)[-1] == "Verdict: no_drift"


def test_too_few_tasks_also_gives_no_verdict():
    result = result_with_outcomes(200, enough_tasks=False)
    # The outcomes alone drifted: drift wins over a part short of data.
    assert result.verdict == DRIFT
    quiet = DriftResult(n_tasks=10, enough_tasks=False, min_outcomes=50)
    assert quiet.task_verdict == TOO_FEW_OUTCOMES
    assert "too few tasks for a verdict (10, minimum 50)" in "\n".join(
        drift_lines(quiet)
    )


def test_each_feature_has_psi_threshold_and_can_alarm(seed):
    rng = np.random.default_rng(seed)
    profile = build_profile(_tasks(rng, 5000))
    # Only the mix of known releases and the campaign changed: transhome's PSI is
    # far above its threshold, but it cannot alarm on PSI (only on unseen values).
    recent = _tasks(rng, 500, releases=("Athena-24.0.30",))
    recent["campaign"] = "mc21"
    thresholds = DriftThresholds()
    found = {f.feature: f for f in feature_drift(profile, recent, thresholds)}
    for f in found.values():
        assert f.threshold == pytest.approx(thresholds.psi + f.expected_psi)
        # The flag and the numbers never disagree: drifted exactly when an alarm
        # check is above its threshold.
        assert f.drifted == (
            (f.psi_alarm and f.psi > f.threshold)
            or (f.unseen_alarm and f.unseen_share > f.unseen_threshold)
        )
    assert found["campaign"].psi > found["campaign"].threshold
    assert not found["campaign"].can_alarm and not found["campaign"].drifted
    assert found["transhome"].psi_shifted and not found["transhome"].psi_alarm
    assert found["transhome"].unseen_alarm and not found["transhome"].drifted
    assert found["nevents_sum"].psi_alarm and found["nevents_sum"].can_alarm

    result = DriftResult(n_tasks=len(recent), features=list(found.values()))
    figures = result.feature_figures()
    assert figures["campaign"]["alarm"] is False
    assert figures["corecount"]["alarm"] is True
    assert set(figures["corecount"]) >= {"psi", "threshold", "alarm"}
    rows = {line.split()[0]: line for line in drift_lines(result)[1:] if "  " in line}
    assert "above threshold, reported only" in rows["campaign"]
    assert rows["campaign"].split()[3] == "no"  # the can-alarm column
    assert rows["corecount"].split()[3] == "PSI"
    assert rows["transhome"].split()[3] == "unseen"


def test_to_dict_carries_the_verdict_and_alarm_flags():
    result = result_with_outcomes(40)
    summary = result.to_dict()
    assert summary["verdict"] == TOO_FEW_OUTCOMES and summary["drifted"] is False
    assert summary["n_outcomes"] == 40
