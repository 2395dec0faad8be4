"""The anchored model row, the label delay, the cadence and the development run."""

from __future__ import annotations

import json

import numpy as np
import pytest
from click.testing import CliRunner

from panda_predictor.ingest.swf import read_swf
from pipelines.trace import walk_forward as wf
from pipelines.trace.anchor import anchored_class, choose_anchor
from tests.test_trace_benchmark import write_trace

PROBA = np.array([[0.5, 0.3, 0.2], [0.1, 0.1, 0.8], [0.3, 0.45, 0.25]])


@pytest.mark.parametrize(
    ("weight", "expected"),
    [(0.0, [0, 2, 1]), (0.2, [0, 2, 0]), (0.5, [2, 2, 0])],
    ids=["plain-argmax", "default", "rule-always"],
)
def test_anchored_class_by_hand(weight, expected):
    # Rule says 2, 2, 0. At w = 0.2 the model must beat the rule's class by 0.25:
    # row 0: 0.5 vs 0.2 (+0.3) overrides; row 2: 0.45 vs 0.3 (+0.15) does not.
    assert anchored_class(PROBA, [2, 2, 0], weight).tolist() == expected


@pytest.mark.parametrize(
    ("proba", "rule", "weight", "match"),
    [
        (PROBA, [0, 1], 0.2, "must be an \\(n, K\\) and an \\(n,\\) array"),
        (PROBA, [0, 1, 2], 1.0, "The 'weight' field must be in \\[0, 1\\)"),
        (PROBA, [0, 1, 3], 0.2, "must hold classes 0..2. Got values from 0 to 3"),
    ],
    ids=["shape", "weight", "class-range"],
)
def test_anchored_class_errors(proba, rule, weight, match):
    with pytest.raises(ValueError, match=match):
        anchored_class(proba, rule, weight)


def test_choose_anchor_takes_the_best_macro_f1_on_validation():
    y = np.array([0, 0, 1, 1, 2, 2])
    baselines = {
        "baseline:b": np.array([0, 0, 1, 1, 2, 1]),  # 5 of 6 right
        "baseline:a": np.array([0, 0, 0, 0, 0, 0]),
        "baseline:c": np.array([0, 0, 1, 1, 2, 1]),  # ties with b: sorted first
    }
    assert choose_anchor(y, baselines, 3) == "baseline:b"
    with pytest.raises(ValueError, match="name at least one baseline"):
        choose_anchor(y, {}, 3)
    with pytest.raises(ValueError, match="at least one job"):
        choose_anchor([], baselines, 3)


def test_label_delay_is_the_turnaround_quantile():
    submit = np.array([0.0, 0.0, 0.0, 0.0, 0.0])
    finish = np.array([10.0, 20.0, 30.0, 40.0, np.nan])
    assert wf.label_delay(submit, finish, 0.0) == 0.0
    assert wf.label_delay(submit, finish, 0.5) == 25.0
    with pytest.raises(ValueError, match="'label_delay_quantile' field must be"):
        wf.label_delay(submit, finish, 1.0)


def test_period_labels_follow_the_cadence(tmp_path, seed):
    frame, _ = read_swf(write_trace(tmp_path / "t.swf", seed))
    times = frame["submit_time"]
    months = set(wf.period_labels(times, "month"))
    weeks = set(wf.period_labels(times, "week"))
    days = set(wf.period_labels(times, "day"))
    assert len(months) < len(weeks) < len(days)
    with pytest.raises(ValueError, match="'cadence' field must be one of"):
        wf.period_labels(times, "year")


def test_walk_forward_respects_cadence_delay_and_anchor_hold_out(
    tmp_path, seed, monkeypatch
):
    """Weekly retraining, the label delay and the anchor never see test rows."""
    frame, _ = read_swf(write_trace(tmp_path / "t.swf", seed, n=600))
    fitted: list[np.ndarray] = []
    anchors_on: list[int] = []
    real_model, real_choose = wf._model, wf.choose_anchor

    def spy_model(kind, n_classes, config):
        inner = real_model(kind, n_classes, config)
        fit = inner.fit

        def recorded(X, y, **kwargs):
            fitted.append(X.index.to_numpy())
            return fit(X, y, **kwargs)

        inner.fit = recorded
        return inner

    def spy_choose(y_val, baselines_val, n_classes):
        anchors_on.append(len(y_val))
        assert not {"baseline:request", "baseline:majority"} & set(baselines_val)
        return real_choose(y_val, baselines_val, n_classes)

    monkeypatch.setattr(wf, "_model", spy_model)
    monkeypatch.setattr(wf, "choose_anchor", spy_choose)
    config = wf.WalkForwardConfig(
        n_estimators=5, cadence="week", label_delay_quantile=0.9
    )
    result = wf.run_walk_forward(frame, ["walltime"], config)
    run = result.runs["walltime"]
    weeks = result.split["test_periods"]
    assert len(weeks) > 4 and all("/" in w for w in weeks)  # weekly periods
    delay = result.split["label_delay_s"]
    assert delay > 0
    submit = frame["submit_s"].to_numpy()
    finish = frame["finish_s"].to_numpy()
    labels = wf.period_labels(frame["submit_time"], "week")
    trained_weeks = [
        w for w in weeks if np.isin(run.rows, np.flatnonzero(labels == w)).any()
    ]
    assert len(fitted) == len(trained_weeks) == len(anchors_on)
    for week, rows in zip(trained_weeks, fitted, strict=True):
        start = submit[labels == week].min()
        assert finish[rows].max() < start
        assert submit[rows].max() < start - delay
    anchored = run.predicted["model:xgboost_anchored"]
    assert ((anchored >= 0) & (anchored < run.bins.n_classes)).all()
    assert set(run.anchors["model:xgboost_anchored"]) == set(trained_weeks)


def test_development_run_drops_the_test_part(tmp_path, seed):
    from panda_predictor.cli.benchmark import benchmark
    from panda_predictor.settings import load_settings

    trace = write_trace(tmp_path / "synthetic.swf", seed, n=600)
    frame, _ = read_swf(trace)
    dev = wf.development_part(frame, 0.2)
    assert len(dev) == 480
    assert dev["submit_s"].max() <= frame["submit_s"].sort_values().iloc[480]
    out = tmp_path / "dev.json"
    result = CliRunner().invoke(
        benchmark,
        [
            "--swf",
            str(trace),
            "--dev",
            "--no-mlflow",
            "--n-estimators",
            "5",
            "--cadence",
            "week",
            "--json",
            str(out),
        ],
        obj=load_settings(home=tmp_path / "home"),
    )
    assert result.exit_code == 0, result.output
    assert "development run: test part dropped" in result.output
    doc = json.loads(out.read_text())
    assert doc["split"]["n_jobs"] == 480 and doc["split"]["development_run"]
    assert doc["split"]["cadence"] == "week"
    assert doc["split"]["test_start"] < str(frame["submit_time"].iloc[480])
    assert "model:xgboost_anchored" in doc["targets"]["walltime"]
    report = tmp_path / "home" / "benchmarks" / "synthetic-dev" / "report.md"
    assert report.is_file()
