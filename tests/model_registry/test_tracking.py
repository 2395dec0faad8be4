"""Registered versions are MLflow models; runs carry inputs, commit, params, metrics.

One real training into a real SQLite MLflow store in a temporary folder (module
fixture), then: the pyfunc round trip, the run's contents, and a moved store.
"""

from __future__ import annotations

import shutil
import time

import mlflow
import pandas as pd
import pytest

from model_registry.registry import (
    BUNDLE_PATH_TAG,
    champion_version,
    set_alias,
    version_metrics,
)
from model_registry.tracking import (
    GIT_COMMIT_TAG,
    configure_mlflow,
    git_commit,
    mlflow_client,
    param_value,
)
from panda_predictor.serving.bundle import load_bundle
from panda_predictor.serving.loader import load_champion
from panda_predictor.serving.predictor import Predictor
from panda_predictor.serving.pyfunc import BUNDLE_SUBDIR, input_example
from panda_predictor.settings import load_settings
from pipelines.retraining.train_and_register import train_and_register
from pipelines.training.config import TrainingConfig

pytestmark = [
    pytest.mark.filterwarnings(
        "ignore:The ``noload`` loader strategy is deprecated:DeprecationWarning"
    ),
    # MLflow's pyfunc loader warns about environment details it cannot verify.
    pytest.mark.filterwarnings("ignore::UserWarning"),
    pytest.mark.filterwarnings("ignore::FutureWarning"),
]

FAST = TrainingConfig(model_kinds=("xgboost",), xgboost={"n_estimators": 20})
TARGETS = ("ramcount", "cputime", "iointensity", "walltime")
#: Wall time of the module's one train_and_register call (set by the fixture).
trained_seconds: list[float] = []


@pytest.fixture(scope="module")
def trained(tmp_path_factory, simulated_sqlite, labelled_history):
    """Train once into a store at home A (default layout: <home>/mlflow.db)."""
    home = tmp_path_factory.mktemp("store-a")
    shutil.copy(simulated_sqlite.home / "panda.sqlite", home / "panda.sqlite")
    settings = _at(home)
    commit = git_commit()  # the code's commit while it trains
    started = time.monotonic()
    summary = train_and_register(
        settings, FAST, progress=False, history=labelled_history
    )
    trained_seconds[:] = [time.monotonic() - started]
    if not summary.gate.promoted:  # a tiny model may stay below its floors
        set_alias(settings, summary.version.version, "champion")
    return settings, summary, commit


def _at(home):
    """Settings with the default layout at ``home``, whatever an earlier test left in
    MLFLOW_TRACKING_URI (mlflow.set_tracking_uri exports it)."""
    return load_settings(
        home=home, mlflow_tracking_uri=f"sqlite:///{home / 'mlflow.db'}"
    )


def _tasks(labelled_history, n=25):
    return labelled_history.frame.tail(n).reset_index(drop=True)


def _pyfunc_champion(settings):
    configure_mlflow(settings)
    return mlflow.pyfunc.load_model(f"models:/{settings.model_name}@champion")


def test_pyfunc_round_trip_equals_the_predictor(trained, labelled_history, tmp_path):
    settings, summary, _ = trained
    model = _pyfunc_champion(settings)
    tasks = _tasks(labelled_history)
    got = model.predict(input_example(tasks, rows=len(tasks)))
    info = champion_version(settings)
    assert info is not None and info.tags[BUNDLE_PATH_TAG] == BUNDLE_SUBDIR
    local = mlflow.artifacts.download_artifacts(
        f"{info.source}/{BUNDLE_SUBDIR}",
        dst_path=str(tmp_path),
        tracking_uri=settings.tracking_uri(),
    )
    expected = Predictor(load_bundle(local), "x", "1").predict_table(tasks)
    pd.testing.assert_frame_equal(got, expected.reset_index(drop=True))
    for target in TARGETS:
        assert f"{target}_value" in got.columns
    assert len(got) == len(tasks)


def test_version_has_signature_and_input_example(trained):
    settings, _, _ = trained
    configure_mlflow(settings)
    info = mlflow.models.get_model_info(f"models:/{settings.model_name}@champion")
    inputs = [c["name"] for c in info.signature.inputs.to_dict()]
    outputs = [c["name"] for c in info.signature.outputs.to_dict()]
    assert "transhome" in inputs and "corecount" in inputs
    assert {f"{t}_class" for t in TARGETS} <= set(outputs)
    assert info.saved_input_example_info is not None


def test_product_loader_reads_only_the_bundle(trained, labelled_history):
    settings, _, _ = trained
    predictor = load_champion(settings)
    tasks = _tasks(labelled_history, 5)
    assert len(predictor.predict(tasks)) == 5
    cached = list(settings.cache_dir().rglob("MLmodel"))
    assert cached == []  # the pyfunc wrapper is not downloaded by the hook's path


def test_run_has_dataset_input_git_commit_params_and_metrics(trained):
    settings, summary, commit = trained
    run = mlflow_client(settings).get_run(summary.run_id)
    inputs = run.inputs.dataset_inputs
    assert len(inputs) == 1
    dataset = inputs[0].dataset
    assert dataset.name.startswith("labelled history ")
    assert len(dataset.digest) >= 8
    if commit is None:
        assert GIT_COMMIT_TAG not in run.data.tags
    else:
        assert run.data.tags[GIT_COMMIT_TAG] == commit
    assert run.data.params["config.model_kinds"] == "xgboost"
    assert not any(v.startswith("(") for v in run.data.params.values())
    metrics = run.data.metrics
    assert metrics["mean_accuracy"] == pytest.approx(summary.metrics["mean_accuracy"])
    assert "ramcount.tail_recall" in metrics
    version = mlflow_client(settings).get_model_version(
        settings.model_name, str(summary.version.version)
    )
    assert not [k for k in version.tags if k.startswith("metric.")]


def test_run_spans_the_training(trained):
    settings, summary, _ = trained
    run = mlflow_client(settings).get_run(summary.run_id)
    seconds = (run.info.end_time - run.info.start_time) / 1000
    # Opened before fitting: the run covers nearly all of train_and_register.
    assert seconds >= 0.8 * trained_seconds[0]


@pytest.mark.parametrize(
    ("value", "text"),
    [(("xgboost", "keras"), "xgboost,keras"), (None, "none"), (0.5, "0.5")],
    ids=["tuple", "none", "float"],
)
def test_param_values_read_as_values(value, text):
    assert param_value(value) == text


def test_git_commit_is_none_outside_a_repository(tmp_path):
    assert git_commit(tmp_path) is None


def test_moved_store_still_serves(trained, labelled_history, tmp_path):
    settings, summary, _ = trained
    moved = tmp_path / "store-b"
    shutil.copytree(settings.home, moved)
    original = settings.home.with_name(settings.home.name + "-away")
    settings.home.rename(original)  # the old place is gone, as after a move
    try:
        at_b = _at(moved)
        tasks = _tasks(labelled_history, 5)
        shutil.rmtree(at_b.cache_dir(), ignore_errors=True)
        product = load_champion(at_b).predict_table(tasks)
        pyfunc = _pyfunc_champion(at_b).predict(input_example(tasks, rows=5))
        pd.testing.assert_frame_equal(pyfunc, product.reset_index(drop=True))
        info = champion_version(at_b)
        assert info is not None and str(moved) in info.source
    finally:
        original.rename(settings.home)


def test_moved_roots_only_for_the_products_layout(tmp_path):
    from model_registry.relocation import moved_roots

    new = tmp_path / "b" / "mlartifacts"
    (new / "exp").mkdir(parents=True)
    (tmp_path / "kept").mkdir()
    gone = (tmp_path / "a" / "mlartifacts").as_uri()
    locations = [
        ("exp", f"{gone}/exp"),  # moved: old gone, new there
        ("other", f"{gone}/elsewhere"),  # not <root>/<name>
        ("kept", (tmp_path / "kept").as_uri()),  # still exists
        ("s3", "s3://bucket/exp"),  # not local
    ]
    assert moved_roots(locations, new.as_uri()) == {gone: new.as_uri()}


def test_moved_store_of_plain_bundles_downloads(tmp_path, empty_mlflow_store):
    import json

    from model_registry.registry import download_version, register_bundle

    home_a = tmp_path / "a"
    home_a.mkdir()
    shutil.copyfile(empty_mlflow_store, home_a / "mlflow.db")
    bundle = tmp_path / "bundle"
    bundle.mkdir()
    (bundle / "bundle.json").write_text(
        json.dumps({"schema_hash": "h", "bins_version": "b"})
    )
    info = register_bundle(_at(home_a), bundle, None, {"m": 1.0})
    home_b = tmp_path / "b"
    home_a.rename(home_b)
    at_b = _at(home_b)
    got = download_version(at_b, info.version, tmp_path / "got")
    assert (got / "bundle.json").is_file()
    run = mlflow_client(at_b).get_run(info.run_id)
    assert run.info.artifact_uri.startswith(home_b.as_uri())


def test_input_example_takes_tasks_with_missing_counts(labelled_history):
    tasks = _tasks(labelled_history, 5)
    example = input_example(tasks, rows=5)
    counts = [c for c in example.columns if c != "jeditaskid"]
    assert not list(example[counts].select_dtypes("integer").columns)
    assert example[counts].select_dtypes("float").shape[1] >= 1


def test_the_training_report_opens_with_the_replay_against_the_scouts(trained):
    _, summary, _ = trained
    text = summary.report.read_text()
    first = text.split("\n## ")[1]
    assert first.startswith("The served decision against the scouts")
    assert "| target | failed jobs | scouts' failed jobs |" in first
    served, scouts = summary.evidence.challenger, summary.evidence.floors["scouts"]
    ram = served["served.ramcount.failed_jobs"], scouts["served.ramcount.failed_jobs"]
    assert f"| ramcount | {ram[0]:.3f} | {ram[1]:.3f} |" in first
    assert "Tasks that keep their scouts: " in first
    # The delay prices have their own section, not a dict in the summary table.
    assert "## Delay prices chosen on the validation part" in text
    assert "| cost |" not in text


def test_the_run_keeps_the_replay_for_model_show(trained):
    settings, summary, _ = trained
    metrics = version_metrics(settings, summary.version)
    scouts = summary.evidence.floors["scouts"]
    for kind in ("failed_jobs", "wasted_hours"):
        name = f"served.ramcount.{kind}"
        assert metrics[name] == pytest.approx(summary.evidence.challenger[name])
        assert metrics[f"scouts.ramcount.{kind}"] == pytest.approx(scouts[name])
