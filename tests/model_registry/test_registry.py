"""Tracking, registration, aliases and the promotion gate on a real MLflow store."""

from __future__ import annotations

from pathlib import Path

import mlflow.artifacts
import pytest

from model_registry import tracking
from model_registry.registry import (
    BundleError,
    NoChampionError,
    champion_version,
    download_champion,
    read_manifest,
    register_bundle,
    set_alias,
)
from tests.bundle_parts import make_bundle

# MLflow 3.17's SQL store uses SQLAlchemy's ``noload`` strategy, deprecated in 2.1.
pytestmark = pytest.mark.filterwarnings(
    "ignore:The ``noload`` loader strategy is deprecated:DeprecationWarning"
)

GOOD = {
    "mean_accuracy": 0.80,
    "ramcount.tail_recall": 0.95,
    "ramcount.under_allocation": 0.03,
    "cputime.tail_recall": 0.90,
}


def files_of(folder: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(folder)): p.read_bytes()
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


def client_of(settings):
    return tracking.mlflow_client(settings)


# --- tracking ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "clean"),
    [
        ("ramcount.tail_recall", "ramcount.tail_recall"),
        ("acc@bin[3]", "acc_bin_3_"),
        ("/abs/../x", "abs/x"),
        ("a//b", "a/b"),
        ("", "_"),
    ],
    ids=["valid", "brackets", "path-escape", "double-slash", "empty"],
)
def test_sanitize_name(raw, clean):
    assert tracking.sanitize_name(raw) == clean


def test_training_run_logs_into_experiment_under_artifact_root(reg_settings, tmp_path):
    report = tmp_path / "report"
    report.mkdir()
    (report / "summary.md").write_text("# ok")
    bins = tmp_path / "bins.yaml"
    bins.write_text("ramcount: [0, 2000]\n")
    with tracking.start_training_run(
        reg_settings, run_name="t1", tags={"k": "v"}
    ) as run:
        tracking.log_params({"xgb": {"depth": 4}, "seed": 1})
        logged = tracking.log_metrics({"ramcount": {"acc@1": 0.5}})
        tracking.log_report_dir(report)
        tracking.log_bins(bins)
        tracking.log_feature_schema({"names": ["coreCount"], "hash": "h1"})
    assert logged == {"ramcount.acc_1": 0.5}
    client = client_of(reg_settings)
    got = client.get_run(run.info.run_id)
    assert got.data.params == {"xgb.depth": "4", "seed": "1"}
    assert got.data.metrics == {"ramcount.acc_1": 0.5}
    assert got.data.tags["k"] == "v"
    assert got.info.status == "FINISHED"
    assert got.info.artifact_uri.startswith(reg_settings.artifact_root())
    names = {f.path for f in client.list_artifacts(run.info.run_id)}
    assert names == {"report", "config"}
    config = {f.path for f in client.list_artifacts(run.info.run_id, "config")}
    assert config == {"config/bins.yaml", "config/feature_schema.json"}


def test_failed_block_marks_run_failed(reg_settings):
    with (
        pytest.raises(RuntimeError, match="boom"),
        tracking.start_training_run(reg_settings) as run,
    ):
        raise RuntimeError("boom")
    assert client_of(reg_settings).get_run(run.info.run_id).info.status == "FAILED"


@pytest.mark.parametrize(
    ("metrics", "match"),
    [
        ({"a": "high"}, "The metric 'a' must be a number. Got 'high' instead."),
        ({"a": True}, "The metric 'a' must be a number"),
        ({"a@b": 1.0, "a_b": 2.0}, "both become 'a_b'"),
    ],
    ids=["string", "bool", "name-collision"],
)
def test_log_metrics_refuses(reg_settings, metrics, match):
    with (
        tracking.start_training_run(reg_settings),
        pytest.raises(ValueError, match=match),
    ):
        tracking.log_metrics(metrics)


# --- registration -----------------------------------------------------------


@pytest.mark.parametrize(
    ("manifest", "match"),
    [
        (None, "must hold bundle.json"),
        ("not json", "must be valid JSON"),
        ("[1]", "must hold a JSON object. Got list instead."),
        ('{"bins_version": "b"}', "The 'schema_hash' field .* Got None instead."),
        ('{"schema_hash": "h", "bins_version": ""}', "The 'bins_version' field"),
    ],
    ids=["missing", "not-json", "not-object", "no-schema-hash", "empty-bins-version"],
)
def test_manifest_errors(tmp_path, manifest, match):
    if manifest is not None:
        (tmp_path / "bundle.json").write_text(manifest)
    with pytest.raises(BundleError, match=match):
        read_manifest(tmp_path)


def test_serving_raises_the_registry_bundle_error(tmp_path):
    """One BundleError: loading a bundle raises the registry's class, not a twin."""
    from panda_predictor.serving import bundle

    assert bundle.BundleError is BundleError
    with pytest.raises(BundleError, match="missing 'bundle.json'"):
        bundle.load_bundle(tmp_path)


def test_register_stores_tags_and_download_returns_same_files(reg_settings, tmp_path):
    assert champion_version(reg_settings) is None
    bundle = make_bundle(tmp_path / "b1", "one", schema_hash="abc123")
    info = register_bundle(reg_settings, bundle, None, GOOD, description="first")
    assert info.version == 1
    assert info.schema_hash == "abc123"
    assert info.bins_version == "bins-1"
    assert info.metrics == GOOD
    assert info.aliases == ()
    with pytest.raises(NoChampionError, match="Run 'panda-predictor train' first"):
        download_champion(reg_settings, tmp_path / "none")

    set_alias(reg_settings, info.version, "champion")
    got = download_champion(reg_settings, tmp_path / "dl")
    assert files_of(got) == files_of(bundle)
    assert champion_version(reg_settings).version == 1

    # Any MLflow user pointed at the store resolves the alias URI to the same files.
    tracking.configure_mlflow(reg_settings)
    by_uri = mlflow.artifacts.download_artifacts(
        f"models:/{reg_settings.model_name}@champion", dst_path=str(tmp_path / "uri")
    )
    assert files_of(Path(by_uri)) == files_of(bundle)


def test_register_into_existing_run(reg_settings, tmp_path):
    with tracking.start_training_run(reg_settings) as run:
        tracking.log_metrics(GOOD)
    info = register_bundle(
        reg_settings, make_bundle(tmp_path / "b", "x"), run.info.run_id, GOOD
    )
    assert info.run_id == run.info.run_id
    files = {f.path for f in client_of(reg_settings).list_artifacts(run.info.run_id)}
    assert "bundle" in files


@pytest.mark.parametrize(
    ("metrics", "match"),
    [({"m": "x"}, "must be a number"), ({"m": float("nan")}, "must be a finite")],
    ids=["string", "nan"],
)
def test_register_refuses_bad_metrics(reg_settings, tmp_path, metrics, match):
    with pytest.raises(ValueError, match=match):
        register_bundle(reg_settings, make_bundle(tmp_path / "b", "x"), None, metrics)


def test_set_alias_refuses_unknown_alias(reg_settings):
    with pytest.raises(ValueError, match="The 'alias' argument must be one of"):
        set_alias(reg_settings, 1, "production")
