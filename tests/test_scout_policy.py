"""The applied / kept_scouts policy: per-task decisions with reasons, and columns."""

from __future__ import annotations

import numpy as np
import pytest

from panda_predictor.core.scout_policy import (
    APPLIED,
    CONFIDENT,
    KEPT_SCOUTS,
    LOW_CONFIDENCE,
    OUTSIDE_DOMAIN,
    DecisionPolicy,
    in_training_domain,
)


@pytest.mark.parametrize(
    ("conf", "in_domain", "decision", "reason"),
    [
        (
            {"ramcount": 0.9, "cputime": 0.8},
            True,
            APPLIED,
            "confident: lowest cputime 0.80 >= 0.60",
        ),
        (
            {"ramcount": 0.42, "cputime": 0.8},
            True,
            KEPT_SCOUTS,
            "low confidence: ramcount 0.42 < 0.60",
        ),
        (
            {"ramcount": 0.42, "cputime": 0.5},
            True,
            KEPT_SCOUTS,
            "low confidence: ramcount 0.42 < 0.60; cputime 0.50 < 0.60",
        ),
        (
            {"ramcount": 0.9, "cputime": 0.9},
            False,
            KEPT_SCOUTS,
            "outside training domain: unknown transformation and framework",
        ),
        (
            {"ramcount": 0.6, "cputime": 0.6},
            True,
            APPLIED,
            "confident: lowest ramcount 0.60 >= 0.60",
        ),
    ],
    ids=["applied", "one-low", "two-low", "out-of-domain", "at-threshold"],
)
def test_policy_decisions_and_reasons(conf, in_domain, decision, reason):
    classes = {t: 1 for t in conf}
    verdict = DecisionPolicy(confidence_threshold=0.6).decide(classes, conf, in_domain)
    assert verdict.decision == decision
    assert verdict.reason == reason
    assert verdict.applied is (decision == APPLIED)
    assert verdict.classes == classes


def test_policy_vectorised_matches_one_by_one():
    policy = DecisionPolicy(0.6)
    conf = {
        "ramcount": np.array([0.9, 0.3, 0.7]),
        "iointensity": np.array([0.7, 0.9, 0.2]),
    }
    classes = {"ramcount": np.array([1, 2, 0]), "iointensity": np.array([0, 0, 1])}
    domain = np.array([True, True, False])
    many = policy.decide_many(classes, conf, domain)
    assert [d.decision for d in many] == [APPLIED, KEPT_SCOUTS, KEPT_SCOUTS]
    for i, got in enumerate(many):
        one = policy.decide(
            {t: classes[t][i] for t in classes},
            {t: conf[t][i] for t in conf},
            domain[i],
        )
        assert got == one
    assert DecisionPolicy.from_dict(policy.to_dict()).confidence_threshold == 0.6


@pytest.mark.parametrize(
    ("threshold", "classes", "conf", "domain", "match"),
    [
        (1.5, {"a": [0]}, {"a": [0.5]}, None, "'confidence_threshold' field"),
        (0.6, {"a": [0]}, {"b": [0.5]}, None, "same, non-empty set of targets"),
        (0.6, {"a": [0, 1]}, {"a": [0.5]}, None, "one class and one confidence"),
        (0.6, {"a": [0]}, {"a": [0.5]}, [True, False], "'in_domain' field"),
    ],
    ids=["threshold-above-1", "target-mismatch", "length-mismatch", "domain-length"],
)
def test_policy_errors(threshold, classes, conf, domain, match):
    with pytest.raises(ValueError, match=match):
        DecisionPolicy(threshold).decide_many(classes, conf, domain)


@pytest.mark.parametrize(
    ("transformation", "framework", "expected"),
    [("Reco_tf.py", "x", True), ("new.py", "Athena", True), ("new.py", "New", False)],
    ids=["known-transformation", "known-framework", "both-unknown"],
)
def test_in_training_domain(transformation, framework, expected):
    assert (
        in_training_domain(transformation, framework, {"Reco_tf.py"}, ["Athena"])
        is expected
    )


def test_table_route_gives_the_same_decisions_as_the_objects(seed):
    rng = np.random.default_rng(seed)
    n = 500
    names = ["ramcount", "cputime", "walltime"]
    conf = {t: rng.uniform(0.3, 1.0, n) for t in names}
    conf["cputime"][:5] = np.nan  # a NaN confidence is never confident
    classes = {t: rng.integers(0, 4, n) for t in names}
    domain = rng.random(n) > 0.1
    policy = DecisionPolicy(0.6)
    many = policy.decide_many(classes, conf, domain)
    table = policy.decide_table(classes, conf, domain)
    assert table["decision"].tolist() == [d.decision for d in many]
    kind_of = {
        "confident:": CONFIDENT,
        "low": LOW_CONFIDENCE,
        "outside": OUTSIDE_DOMAIN,
    }
    expected_kind = [kind_of[d.reason.split(" ", 1)[0]] for d in many]
    assert table["reason_kind"].tolist() == expected_kind
    for i, d in enumerate(many):
        if d.applied:  # the sentence names the weakest target and its confidence
            weakest = table["weakest_target"][i]
            assert d.reason.startswith(f"confident: lowest {weakest} ")
            assert table["weakest_confidence"][i] == pytest.approx(
                d.confidences[weakest]
            )
    assert set(table["weakest_target"][:5]) == {"cputime"}
    assert {APPLIED, KEPT_SCOUTS} == set(table["decision"])


def test_table_route_checks_its_input_like_the_objects():
    with pytest.raises(ValueError, match="one class and one confidence"):
        DecisionPolicy(0.6).decide_table({"a": [0, 1]}, {"a": [0.5]})
