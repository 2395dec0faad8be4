"""Typed settings: defaults, config file, environment, errors."""

from __future__ import annotations

import pytest

from panda_predictor.settings import SettingsError, load_settings
from pipelines.training.config import TrainingConfig, training_config


def test_defaults_point_at_the_embedded_store(tmp_path, monkeypatch):
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    settings = load_settings(home=tmp_path)
    assert settings.database_url() == f"sqlite:///{tmp_path.as_posix()}/panda.sqlite"
    assert settings.tracking_uri().endswith("/mlflow.db")
    assert settings.schema_for("sqlite") is None
    assert settings.schema_for("postgresql") == "doma_panda"
    assert settings.schema_for("oracle") == "ATLAS_PANDA"


def test_environment_beats_config_file_which_beats_defaults(tmp_path, monkeypatch):
    config = tmp_path / "pp.yaml"
    config.write_text("delay_price: 0.7\nhook_batch_size: 50\n")
    monkeypatch.setenv("PANDA_PREDICTOR_HOOK_BATCH_SIZE", "75")
    settings = load_settings(config)
    assert settings.delay_price == 0.7
    assert settings.hook_batch_size == 75


def test_mlflow_tracking_uri_is_honoured(monkeypatch):
    monkeypatch.setenv("MLFLOW_TRACKING_URI", "sqlite:////tmp/elsewhere.db")
    assert load_settings().tracking_uri() == "sqlite:////tmp/elsewhere.db"


def test_empty_schema_means_none():
    assert load_settings(db_schema="").schema_for("postgresql") is None


@pytest.mark.parametrize(
    ("env", "value", "match"),
    [
        pytest.param("DELAY_PRICE", "-1", "delay_price", id="range"),
        pytest.param(
            "CONFIDENCE_THRESHOLD",
            "0.5",
            "confidence_threshold: was replaced by 'delay_price'",
            id="replaced",
        ),
        pytest.param(
            "GATE_TAIL_RECALL_SHORTFALL",
            "0.05",
            "gate_tail_recall_shortfall: was replaced by the gate's replay goals",
            id="replaced-floor",
        ),
        pytest.param(
            "GATE_MAX_SHORT_SHARE",
            "0.05",
            "gate_max_short_share: was replaced by the gate's replay goals",
            id="replaced-short-share",
        ),
        pytest.param("HOOK_BATCH_SIZE", "many", "hook_batch_size", id="type"),
        pytest.param(
            "REFINER_HISTORY_REFRESH_SECONDS",
            "-1",
            r"refiner_history_refresh_seconds: Input should be greater than or equal "
            r"to 0 \(got '-1'\)",
            id="refiner-history-negative",
        ),
        pytest.param(
            "REFINER_HISTORY_REFRESH_SECONDS",
            "inf",
            r"refiner_history_refresh_seconds: Input should be a finite number "
            r"\(got 'inf'\)",
            id="refiner-history-infinite",
        ),
        pytest.param("MODE", "panic", "mode", id="choice"),
        pytest.param(
            "EARLY_REMEASURE",
            "sometimes",
            r"early_remeasure.bool: Input should be a valid boolean.*"
            r"early_remeasure.literal\['auto'\]: Input should be 'auto' "
            r"\(got 'sometimes'\)",
            id="true-false-or-auto",
        ),
    ],
)
def test_bad_values_name_the_setting(monkeypatch, env, value, match):
    monkeypatch.setenv(f"PANDA_PREDICTOR_{env}", value)
    with pytest.raises(SettingsError, match=match):
        load_settings()


@pytest.mark.parametrize(
    ("content", "match"),
    [
        pytest.param(None, "does not exist", id="missing"),
        pytest.param("- a\n- b\n", "must hold a mapping", id="list"),
        pytest.param("no_such_setting: 1\n", "no_such_setting", id="unknown"),
    ],
)
def test_bad_config_files(tmp_path, content, match):
    path = tmp_path / "pp.yaml"
    if content is not None:
        path.write_text(content)
    with pytest.raises(SettingsError, match=match):
        load_settings(path)


def test_nothing_is_read_at_import(tmp_path):
    """Importing the package with a broken config must work; using it must not."""
    import subprocess
    import sys

    code = (
        "import panda_predictor.settings as s, panda_predictor.cli\n"
        "try:\n    s.get_settings()\nexcept s.SettingsError as e:\n    print('late')"
    )
    env = {"PANDA_PREDICTOR_CONFIG": str(tmp_path / "missing.yaml"), "PATH": ""}
    out = subprocess.run(
        [sys.executable, "-c", code],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "late"


@pytest.mark.parametrize(
    ("value", "match"),
    [
        (1.5, r"rollout_share: Input should be less than or equal to 1 \(got 1.5\)"),
        (-0.2, r"rollout_share: Input should be greater than or equal to 0"),
        ("half", r"rollout_share: Input should be a valid number.*\(got 'half'\)"),
    ],
    ids=["above-1", "negative", "not-a-number"],
)
def test_rollout_share_out_of_range_names_the_field(value, match):
    with pytest.raises(SettingsError, match=match):
        load_settings(rollout_share=value)


def test_shadow_mode_and_share_come_from_the_environment(monkeypatch):
    monkeypatch.setenv("PANDA_PREDICTOR_MODE", "shadow")
    monkeypatch.setenv("PANDA_PREDICTOR_ROLLOUT_SHARE", "0.25")
    settings = load_settings()
    assert (settings.mode, settings.rollout_share) == ("shadow", 0.25)


@pytest.mark.parametrize(
    ("value", "expected"), [("auto", "auto"), ("true", True), ("false", False)]
)
def test_the_early_remeasurement_is_on_off_or_chosen(monkeypatch, value, expected):
    monkeypatch.delenv("PANDA_PREDICTOR_EARLY_REMEASURE", raising=False)
    assert load_settings().early_remeasure == "auto"  # the default
    monkeypatch.setenv("PANDA_PREDICTOR_EARLY_REMEASURE", value)
    assert load_settings().early_remeasure == expected
    assert training_config(load_settings()).early_remeasure == expected


def test_a_training_file_s_early_remeasurement_is_checked():
    with pytest.raises(ValueError, match="'early_remeasure' field must be true, false"):
        TrainingConfig(early_remeasure="sometimes")
