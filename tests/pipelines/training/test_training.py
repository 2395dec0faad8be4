"""Training pipeline: real small runs of both model kinds on simulated history."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from panda_predictor.bins_file import load_bins
from panda_predictor.core.assess.evaluation import evaluate_target
from panda_predictor.serving.bundle import BundleError, load_bundle, save_bundle
from panda_predictor.serving.predictor import Predictor
from pipelines.training.config import TrainingConfig
from pipelines.training.dataset import LabelledHistory
from pipelines.training.train import gate_metrics, train

FAST = TrainingConfig(
    xgboost={"n_estimators": 40},
    keras={"epochs": 3, "batch_size": 256},
)
TARGETS = ("ramcount", "cputime", "iointensity", "walltime")


@pytest.fixture(scope="module")
def both_kinds(labelled_history):
    return train(labelled_history, load_bins(), FAST)


def majority_baseline(truth: np.ndarray, n_classes: int, target: str):
    """Score the strongest constant guess: the test part's own most frequent class.

    Taking the majority of the very data scored (not of the training part) makes the
    baseline as hard to beat as a constant can be.
    """
    guess = np.full(truth.size, np.bincount(truth).argmax())
    return evaluate_target(truth, guess, n_classes, target)


def test_both_kinds_train_and_beat_the_majority_class(both_kinds):
    """Macro-F1, the score the training itself ranks kinds by, strictly beats the
    majority class on the same test tasks, for every kind, every target and the
    served bundle. (Accuracy is not the claim: the tail rule may trade some of it for
    recall of the large classes.)"""
    y = both_kinds.y_test
    scored = {kind: r.evaluation for kind, r in both_kinds.kinds.items()}
    scored["served"] = both_kinds.served
    for kind, evaluation in scored.items():
        if kind != "served":
            assert set(both_kinds.kinds[kind].models) == set(TARGETS)
        assert set(evaluation.targets) == set(TARGETS)
        for target, truth in y.items():
            ev = evaluation.targets[target]
            assert ev.n_samples == truth.size
            majority = majority_baseline(truth, ev.n_classes, target)
            assert ev.macro_f1 > majority.macro_f1, (
                kind,
                target,
                ev.macro_f1,
                majority.macro_f1,
            )


def test_majority_baseline_is_the_best_constant_guess():
    """The baseline the test above compares with is scored as documented."""
    truth = np.array([0, 1, 1, 2, 1])
    majority = majority_baseline(truth, 3, "ramcount")
    assert majority.accuracy == pytest.approx(3 / 5)
    # Only class 1 is ever right: F1 = 2 * 0.6 * 1 / 1.6 = 0.75, over 3 classes.
    assert majority.macro_f1 == pytest.approx(0.75 / 3)


def test_split_is_time_ordered_and_test_is_newest(both_kinds, labelled_history):
    info = both_kinds.split_info
    assert info["train_rows"] > info["test_rows"] > 0
    train_end = pd.Timestamp(info["train_period"].split(" .. ")[1])
    test_start = pd.Timestamp(info["test_period"].split(" .. ")[0])
    assert train_end <= test_start


def test_served_kind_is_the_better_on_validation(both_kinds):
    for target, kind in both_kinds.served_kinds.items():
        scores = {k: r.val_macro_f1[target] for k, r in both_kinds.kinds.items()}
        assert scores[kind] == max(scores.values())


def test_tail_rule_reaches_its_recall_target_on_validation(both_kinds):
    for result in both_kinds.kinds.values():
        for target, rule in result.rules.items():
            for cls, report in rule.report_.items():
                if report["fallback"]:
                    continue
                if report["limited_by_precision"]:
                    # The floor keeps precision; recall is what is left above it.
                    assert report["precision_rule"] >= 0.2 or report["recall_rule"] == 0
                else:
                    assert report["recall_rule"] >= 0.95, (target, cls, report)
    reports = [r for k in both_kinds.kinds.values() for r in k.rules.values()]
    assert any(
        not rep["limited_by_precision"] for r in reports for rep in r.report_.values()
    )


def test_gate_metrics_name_what_the_gate_compares(both_kinds):
    metrics = gate_metrics(both_kinds.served)
    assert 0 <= metrics["mean_accuracy"] <= 1
    for target in both_kinds.y_test:
        assert f"{target}.tail_recall" in metrics
        assert f"{target}.under_allocation" in metrics


def test_saved_bundle_predicts_the_same_classes(both_kinds, labelled_history, tmp_path):
    bundle = both_kinds.bundle
    path = save_bundle(bundle, tmp_path / "bundle")
    before = Predictor(bundle, "m", "1")
    after = Predictor(load_bundle(path), "m", "1")
    tasks = both_kinds.test_tasks.head(300)
    _, chosen_before, conf_before = before.classify(tasks, labelled_history.history)
    _, chosen_after, conf_after = after.classify(tasks, labelled_history.history)
    for target in chosen_before:
        np.testing.assert_array_equal(chosen_before[target], chosen_after[target])
        np.testing.assert_allclose(conf_before[target], conf_after[target], atol=1e-5)


def test_bundle_with_tampered_bins_is_refused(trained_bundle_dir, tmp_path):
    import shutil

    copy = tmp_path / "bundle"
    shutil.copytree(trained_bundle_dir, copy)
    text = (copy / "bins.yaml").read_text().replace("version: default-1", "version: x")
    (copy / "bins.yaml").write_text(text)
    with pytest.raises(BundleError, match="bins version"):
        load_bundle(copy)


def test_predictor_decides_with_reasons(trained_bundle_dir, labelled_history):
    predictor = Predictor(load_bundle(trained_bundle_dir), "m", "7")
    tasks = labelled_history.tasks.tail(50)
    predictions = predictor.predict(tasks, labelled_history.history)
    assert len(predictions) == 50
    for p in predictions:
        assert p.decision in ("applied", "kept_scouts")
        assert p.reason
        assert p.model_version == "7"
        for t in p.targets.values():
            assert abs(sum(t.probabilities) - 1) < 1e-3
            assert t.lower is None or t.upper is None or t.lower < t.upper


def test_unknown_transformation_and_framework_start_with_the_scouts_values(
    trained_bundle_dir, labelled_history
):
    bundle = load_bundle(trained_bundle_dir)
    predictor = Predictor(bundle, "m", "1")
    task = labelled_history.tasks.tail(1).copy()
    task["transpath"] = "NeverSeen_tf.py"
    task["transhome"] = "NoSuchFramework-99.0.0"
    (prediction,) = predictor.predict(task)
    assert prediction.decision == "applied"
    assert prediction.reason.startswith("outside training domain")
    # Every priced target asks for its request, else its default: for memory the
    # queue's, for time the top class's value.
    policy = predictor.policy
    for t in ("ramcount", "cputime", "walltime"):
        request = float(task.get(f"requested_{t}", pd.Series([np.nan])).iloc[0])
        default = request if request > 0 else policy.choosers[t].default_value
        assert prediction.targets[t].value == pytest.approx(default), t


@pytest.mark.parametrize(
    ("mutate", "match"),
    [
        pytest.param(lambda f: f.head(5), "at least 20 labelled tasks", id="too-few"),
        pytest.param(
            lambda f: f.drop(columns=["walltime"]), "label column", id="no-target"
        ),
        pytest.param(
            lambda f: f.assign(ramcount=100.0), "at least two classes", id="one-class"
        ),
    ],
)
def test_bad_training_sets_get_clear_errors(labelled_history, mutate, match):
    frame = mutate(labelled_history.frame.copy())
    config = TrainingConfig(model_kinds=("xgboost",), xgboost={"n_estimators": 5})
    with pytest.raises(ValueError, match=match):
        train(LabelledHistory(frame), load_bins(), config)


def test_time_decay_weights_halve_every_half_life():
    from pipelines.training.fitting import time_decay_weights

    created = pd.Series(pd.to_datetime(["2025-01-01", "2025-03-02", "2025-05-31"]))
    np.testing.assert_allclose(time_decay_weights(created, 150.0), [0.5, 0.5**0.6, 1])
    assert time_decay_weights(created, None) is None
    with pytest.raises(ValueError, match="'half_life_days' field must be positive"):
        time_decay_weights(created, 0.0)


def test_half_lives_compared_on_a_sample_and_the_window_bounds_the_fit(
    labelled_history, caplog, capsys
):
    """A large training part: candidates on a sample, one fit on the newest rows."""
    config = TrainingConfig(
        model_kinds=("xgboost",),
        xgboost={"n_estimators": 30},
        half_life_sample_rows=300,
        max_train_rows=800,
        quantise_min_rows=500,
        combine_rules=False,
    )
    with caplog.at_level("INFO", logger="pipelines.training.fitting"):
        result = train(labelled_history, load_bins(), config, progress=True)

    assert result.split_info["train_rows"] == 800  # the newest 800 of the part
    assert result.split_info["history_train_rows"] > 800
    messages = [r.getMessage() for r in caplog.records]
    assert any(m.startswith("quantised 800 training") for m in messages)
    fits = [m for m in messages if m.startswith("fit")]
    sample_fits = [m for m in fits if "sample" in m and m.startswith("fitted")]
    assert len(sample_fits) == 3 * len(TARGETS)  # every candidate, on the sample
    full = [m for m in fits if m.startswith("fitted") and "sample" not in m]
    assert len(full) == len(TARGETS)  # then only the chosen half-life on all rows
    assert {m.split(" on ")[-1] for m in fits if m.startswith("fitting")} <= {
        f"{n} tasks" for n in range(801)
    }
    for target in TARGETS:
        scores = result.kinds["xgboost"].half_life_scores[target]
        assert set(scores) == {"30.0", "180.0", "None"}
        chosen = result.kinds["xgboost"].half_life_days[target]
        assert scores[str(chosen)] >= max(scores.values()) - 0.002  # best, or a tie
    assert "rows/s" in capsys.readouterr().err  # the progress bars


@pytest.mark.parametrize(
    ("field", "value"), [("max_train_rows", 0), ("half_life_sample_rows", -5)]
)
def test_bad_row_limits_get_clear_errors(labelled_history, field, value):
    config = TrainingConfig(model_kinds=("xgboost",), **{field: value})
    with pytest.raises(ValueError, match=f"'{field}' field must be a positive"):
        train(labelled_history, load_bins(), config)
