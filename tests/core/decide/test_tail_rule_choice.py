"""The tail rule says why it chose a class, and the answer carries it."""

from __future__ import annotations

import pytest

from panda_predictor.core.decide.tail_rule import TailDecisionRule


def rule(threshold: float = 0.2) -> TailDecisionRule:
    return TailDecisionRule.from_dict(
        {
            "recall_target": 0.98,
            "n_tail_classes": 1,
            "n_classes_": 5,
            "thresholds_": {"4": threshold},
        }
    )


def test_tail_pick_over_the_most_likely_class_is_explained():
    proba = [0.02, 0.02, 0.04, 0.67, 0.25]
    r = rule()
    assert r.predict([proba])[0] == 4
    text = r.explain(proba, 4)
    assert text == (
        "class 4, p=0.25 over most likely class 3, p=0.67: tail rule, "
        "P(class >= 4) 0.25 >= 0.20, recall target 0.98"
    )


def test_labels_are_shown_and_the_most_likely_class_says_so():
    labels = ["a", "b", "c", "d", "huge"]
    proba = [0.02, 0.02, 0.04, 0.87, 0.05]
    assert rule().explain(proba, 3, labels) == "most likely class 3 (d), p=0.87"


def test_tail_threshold_above_the_top_probability_picks_below_it():
    proba = [0.1, 0.1, 0.1, 0.2, 0.5]
    r = rule(threshold=0.6)
    assert r.predict([proba])[0] == 3
    assert r.explain(proba, 3) == (
        "class 3, p=0.20 over most likely class 4, p=0.50: tail rule, "
        "P(class >= 4) 0.50 < 0.60, recall target 0.98"
    )


def test_a_class_the_rule_did_not_pick_is_the_experts():
    proba = [0.02, 0.02, 0.04, 0.87, 0.05]
    assert (
        rule()
        .explain(proba, 1)
        .startswith(
            "class 1, p=0.02 instead of the model's class 3, p=0.87: the experts'"
        )
    )


@pytest.mark.parametrize(
    ("proba", "chosen"),
    [
        ([0.02, 0.02, 0.04, 0.67, 0.25], 4),
        ([0.1, 0.1, 0.1, 0.2, 0.5], 3),
        ([0.02, 0.02, 0.04, 0.87, 0.05], 3),
        ([0.02, 0.02, 0.04, 0.87, 0.05], 1),
    ],
    ids=["tail-pick", "below-threshold", "most-likely", "experts"],
)
def test_the_rules_class_given_explains_the_same(proba, chosen):
    """A caller that has the rule's class (the predictor) saves predicting it again."""
    r = rule(threshold=0.6 if proba[-1] == 0.5 else 0.2)
    by_rule = int(r.predict([proba])[0])
    assert r.explain(proba, chosen, by_rule=by_rule) == r.explain(proba, chosen)


@pytest.mark.parametrize(
    ("proba", "match"),
    [
        ([0.5, float("nan")], "finite, non-negative"),
        ([1.2, -0.2], "finite, non-negative"),
        ([0.5, float("inf")], "finite, non-negative"),
        ([1.0], "at least 2 classes"),
        ([[0.5, 0.5]], "must be a 2-D array"),
    ],
    ids=["nan", "negative", "infinite", "one-class", "not-one-row"],
)
def test_explain_refuses_what_is_not_one_row_of_probabilities(proba, match):
    with pytest.raises(ValueError, match=match):
        rule().explain(proba, 0)


@pytest.fixture(scope="module")
def predictor(trained_bundle_dir):
    from panda_predictor.serving.bundle import load_bundle
    from panda_predictor.serving.predictor import Predictor

    return Predictor(load_bundle(trained_bundle_dir), "panda-predictor", "1")


def test_every_served_target_carries_its_choice(predictor, labelled_history):
    from panda_predictor.core.features.pipeline import TASK_COLUMNS
    from panda_predictor.http_api.results import predict_tasks

    frame = labelled_history.frame[list(TASK_COLUMNS)]
    records = frame.head(40).to_dict("records")
    results = predict_tasks(predictor, records, explain_features=False)
    for result in results:
        for target in result["targets"].values():
            choice = target["choice"]
            k = target["class_index"]
            top = max(
                range(len(target["probabilities"])),
                key=target["probabilities"].__getitem__,
            )
            if k == top:
                assert choice.startswith(f"most likely class {k}"), choice
            else:
                assert f"class {k}" in choice and f"class {top}" in choice, choice
    assert results and all(t["choice"] for r in results for t in r["targets"].values())
