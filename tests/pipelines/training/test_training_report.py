"""The evaluation report: Markdown tables and valid PNG plots, models side by side."""

from __future__ import annotations

import re
import sys

import numpy as np
import pytest

from panda_predictor.core.assess.evaluation import all_correct, evaluate_targets
from panda_predictor.core.decide.tail_rule import (
    TailDecisionRule,
    coverage_accuracy_curve,
)
from panda_predictor.core.domain.targets import TARGET_NAMES
from pipelines.training.report import write_report

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


@pytest.fixture
def results(seed):
    """Return report inputs for two models on one synthetic test set of 4 targets."""
    rng = np.random.default_rng(seed)
    n, k = 120, 3
    y_true = {t: rng.integers(0, k, n) for t in TARGET_NAMES}
    evaluations, tails, curves = {}, {}, {}
    for model, noise in (("xgboost", 0.3), ("keras", 0.5)):
        preds, confs = {}, []
        tails[model] = {}
        for t in TARGET_NAMES:
            logits = np.eye(k)[y_true[t]] * 2 + rng.normal(0, noise * 3, (n, k))
            proba = np.exp(logits) / np.exp(logits).sum(axis=1, keepdims=True)
            rule = TailDecisionRule(recall_target=0.9).fit(proba[:60], y_true[t][:60])
            pred, conf = rule.predict_with_confidence(proba)
            preds[t] = pred
            confs.append(conf)
            tails[model][t] = rule.report_
        evaluations[model] = evaluate_targets(
            y_true,
            preds,
            n_classes={t: k for t in TARGET_NAMES},
            class_names={"ramcount": ["<2000", "2000-4000", ">=4000 | big"]},
        )
        curves[model] = coverage_accuracy_curve(
            np.min(confs, axis=0), all_correct(y_true, preds)
        )
    return evaluations, tails, curves


def test_report_writes_markdown_and_valid_pngs(tmp_path, results):
    evaluations, tails, curves = results
    path = write_report(
        tmp_path / "out",
        evaluations,
        tails,
        curves,
        metadata={"test rows": 120, "data": "synthetic"},
    )
    text = path.read_text()
    assert path == tmp_path / "out" / "report.md"
    images = re.findall(r"!\[[^\]]*\]\(([^)]+)\)", text)
    # per target: one recall plot + one confusion matrix per model; one coverage plot
    assert len(images) == len(TARGET_NAMES) * 3 + 1
    for rel in images:
        png = path.parent / rel
        assert png.read_bytes()[:8] == PNG_SIGNATURE, rel
    assert len(list((path.parent / "img").glob("*.png"))) == len(images)
    # No figure is left open in pyplot's registry (if anyone imported pyplot at all).
    pyplot = sys.modules.get("matplotlib.pyplot")
    assert pyplot is None or pyplot.get_fignums() == []


def test_report_compares_models_side_by_side(tmp_path, results):
    evaluations, tails, curves = results
    text = write_report(tmp_path, evaluations, tails, curves).read_text()
    assert "| metric | xgboost | keras |" in text
    exact = evaluations["keras"].exact_match_rate
    assert "| exact match (all targets right) | " in text
    assert f"{exact:.3f} |" in text
    for target in TARGET_NAMES:
        assert f"## {target}" in text
    assert "| xgboost | ramcount | 2 |" in text  # tail rule row
    assert ">=4000 \\| big" in text  # pipes in class names are escaped
    assert "## Coverage vs accuracy" in text


def test_report_without_optional_parts(tmp_path, results):
    evaluations, _, _ = results
    text = write_report(tmp_path, {"xgboost": evaluations["xgboost"]}).read_text()
    assert "Tail decision rules" not in text
    assert "Coverage vs accuracy" not in text
    assert not (tmp_path / "img" / "coverage_accuracy.png").exists()


@pytest.mark.parametrize(
    ("make", "match"),
    [
        (lambda ev: {}, "at least one model"),
        (
            lambda ev: {
                "a": ev["xgboost"],
                "b": evaluate_targets({"ramcount": [0, 1]}, {"ramcount": [0, 1]}),
            },
            "same targets",
        ),
    ],
    ids=["no-models", "different-targets"],
)
def test_report_errors(tmp_path, results, make, match):
    with pytest.raises(ValueError, match=match):
        write_report(tmp_path, make(results[0]))


def test_report_says_which_kind_serves_each_target_and_why(tmp_path, results):
    evaluations, tails, curves = results
    served = {t: ("keras" if t == "ramcount" else "xgboost") for t in TARGET_NAMES}
    validation = {
        "xgboost": dict.fromkeys(TARGET_NAMES, 0.6) | {"ramcount": 0.51},
        "keras": dict.fromkeys(TARGET_NAMES, 0.5) | {"ramcount": 0.54},
    }
    text = write_report(
        tmp_path,
        evaluations,
        tails,
        curves,
        served_kinds=served,
        validation_f1=validation,
    ).read_text()
    section = text.split("## Which model kind serves each target")[1].split("##")[0]
    assert "a mixed bundle" in section
    rows = {
        line.split("|")[1].strip(): line
        for line in section.splitlines()
        if line.startswith("| ") and not line.startswith("| target")
    }
    assert set(rows) == set(TARGET_NAMES)
    assert "best validation macro-F1: keras 0.540 vs xgboost 0.510" in rows["ramcount"]
    assert "best validation macro-F1: xgboost 0.600 vs keras 0.500" in rows["cputime"]
    # The test macro-F1 of each kind is shown next to the validation one.
    ram_test = f"{evaluations['keras'].targets['ramcount'].macro_f1:.3f}"
    assert ram_test in rows["ramcount"]


def test_report_of_one_kind_says_so(tmp_path, results):
    evaluations, _, _ = results
    text = write_report(
        tmp_path,
        {"xgboost": evaluations["xgboost"]},
        served_kinds=dict.fromkeys(TARGET_NAMES, "xgboost"),
        validation_f1={"xgboost": dict.fromkeys(TARGET_NAMES, 0.5)},
    ).read_text()
    assert "One kind serves every target." in text
    assert "only kind trained (xgboost)" in text


def test_report_shows_the_calibration_of_each_target(tmp_path, results, seed):
    from panda_predictor.core.decide.calibration import fit_calibrator
    from pipelines.training.calibration import ServedParts

    evaluations, tails, curves = results
    rng = np.random.default_rng(seed)
    calibration, calibrators = {}, {}
    for target in TARGET_NAMES:
        logits = rng.normal(0, 1.5, (400, 3))
        truth = np.exp(logits) / np.exp(logits).sum(axis=1, keepdims=True)
        y = (truth.cumsum(axis=1) < rng.random(400)[:, None]).sum(axis=1)
        sharp = truth**3 / (truth**3).sum(axis=1, keepdims=True)
        calibration[target] = ServedParts(sharp[:200], y[:200], sharp[200:], y[200:])
        calibrators[target] = fit_calibrator(sharp[:200], y[:200], "temperature")
    path = write_report(
        tmp_path, evaluations, tails, curves,
        calibration=calibration, calibrators=calibrators,
    )  # fmt: skip
    text = path.read_text()
    assert "## Calibration of the served distribution" in text
    for target in TARGET_NAMES:
        png = path.parent / "img" / f"reliability_{target}.png"
        assert png.read_bytes()[:8] == PNG_SIGNATURE
        assert f"| {target} | test | temperature | 200 |" in text


#: A bundle's info["cost"] as choose_price writes it (the demo's shape).
COST = {
    "delay_price": 0.25,
    "target_prices": {"ramcount": 0.25},
    "fixed_targets": [],
    "scouts_value_targets": ["cputime"],
    "tasks": 2967,
    "chosen": {"ramcount": "0.25", "cputime": "scouts_value"},
    "margin_at": {
        "ramcount": {"0.25": 0.2389, "4": -0.2891, "scouts_value": 0.0},
        "cputime": {"0.25": -57.9167, "4": -16.6364, "scouts_value": 0.0},
    },
    "fixed_margin_at": {"ramcount": {"0.25": 0.1, "4": 0.3, "scouts_value": 0.0}},
    "short_at": {
        "ramcount": {"0.25": 0.0586, "4": 0.0131, "scouts_value": 0.4907},
        "cputime": {"0.25": 0.2289, "4": 0.0694, "scouts_value": 0.0047},
    },
}


def _section(text, title):
    return text.split(f"## {title}\n")[1].split("\n## ")[0]


def test_the_prices_get_a_table_with_the_chosen_candidate_in_bold(tmp_path, results):
    evaluations, _, _ = results
    text = write_report(
        tmp_path / "p",
        evaluations,
        metadata={"cadence": {"days": 91, "loss": 0.5}},
        prices=COST,
    ).read_text()
    # Mappings in the summary table read as pairs, not as Python dicts.
    assert "| cadence | days: 91, loss: 0.5 |" in _section(text, "The run")
    table = [
        line
        for line in _section(
            text, "Delay prices chosen on the validation part"
        ).splitlines()
        if line.startswith("| ")
    ]
    assert table[0] == (
        "| candidate | ramcount margin | ramcount short | cputime margin | "
        "cputime short |"
    )
    assert table[1] == "| 0.25 | **0.239** | 0.059 | -57.9 | 0.229 |"
    assert table[2] == "| 4 | -0.289 | 0.013 | -16.6 | 0.069 |"
    assert table[3] == "| scouts_value | 0 | 0.491 | **0** | 0.005 |"


def test_a_price_within_the_noise_is_marked_and_served_for_the_scouts_value(
    tmp_path, results
):
    evaluations, _, _ = results
    cost = {
        **COST,
        "chosen": {"ramcount": "0.25", "cputime": "4"},
        "scouts_value_targets": [],
        "saving_within_noise_at": {"cputime": {"4": 0.31}, "ramcount": {"4": -0.1}},
    }
    text = write_report(tmp_path / "p", evaluations, prices=cost).read_text()
    section = _section(text, "Delay prices chosen on the validation part")
    assert "| 4 | -0.289 | 0.013 | **-16.6** ~ | 0.069 |" in section
    assert "| scouts_value | 0 | 0.491 | 0 | 0.005 |" in section
    assert "the gate's goals" in section


def test_fixed_targets_show_their_fixed_margins_and_a_configured_price_one_line(
    tmp_path, results
):
    evaluations, _, _ = results
    fixed = {
        **COST,
        "fixed_targets": ["ramcount"],
        "chosen": {"ramcount": "4", "cputime": "scouts_value"},
    }
    text = write_report(tmp_path / "f", evaluations, prices=fixed).read_text()
    section = _section(text, "Delay prices chosen on the validation part")
    assert "| candidate | ramcount margin (Fixed) |" in section
    assert "| 4 | **0.3** | 0.013 |" in section
    assert "Written `...Fixed` (PanDA's re-measurement keeps them): ramcount" in section
    configured = write_report(
        tmp_path / "c", evaluations, prices={"delay_price": 2.0}
    ).read_text()
    assert "One delay price for every target: 2.0 (configured)." in configured


def test_a_run_sized_for_the_early_remeasurement_says_so(tmp_path, results):
    evaluations, _, _ = results
    plain = write_report(tmp_path / "p", evaluations, prices=COST).read_text()
    early = {**COST, "early_remeasure": True}
    text = write_report(tmp_path / "e", evaluations, prices=early).read_text()
    section = _section(text, "Delay prices chosen on the validation part")
    assert "Sized for the early re-measurement" in section
    assert "Sized for the early re-measurement" not in plain


def test_an_early_remeasurement_chosen_on_validation_tells_both_margins(
    tmp_path, results
):
    evaluations, _, _ = results
    chosen = {"served_margin": {"False": -0.037, "True": 0.0}}
    early = {**COST, "early_remeasure": True, "early_remeasure_chosen": chosen}
    text = write_report(tmp_path / "a", evaluations, prices=early).read_text()
    section = _section(text, "Delay prices chosen on the validation part")
    assert (
        "The early re-measurement was chosen on ('auto'): the worst chosen target's "
        "margin is 0 with it and -0.037 without it (a tie leaves it off)."
    ) in section
    off = {**early, "early_remeasure": False}
    text = write_report(tmp_path / "o", evaluations, prices=off).read_text()
    assert "was chosen off ('auto'): the worst chosen" in text
    harbour = {**chosen, "as_scouts": {"False": False, "True": True}}
    as_scouts = {**early, "early_remeasure_chosen": harbour}
    text = write_report(tmp_path / "s", evaluations, prices=as_scouts).read_text()
    assert (
        "chosen on ('auto'): re-measured early, no price beats the scouts' own "
        "value, so its tasks replay as the scouts do; the worst chosen"
    ) in text
