"""``panda-predictor model`` and gate tolerances, on a real MLflow store in tmp."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from model_registry.gate import (
    GateEvidence,
    GateThresholds,
    judge,
)
from model_registry.manual import ManualModelError, operator, promote, rollback
from model_registry.promotion import (
    GateDecision,
    promote_if_not_worse,
)
from model_registry.registry import (
    champion_version,
    get_version,
    register_bundle,
    version_by_alias,
)
from model_registry.replay_table import HEADING, replay_metrics, replay_of
from model_registry.tolerances import (
    ToleranceError,
    parse_tolerances,
)
from model_registry.verdict_table import verdict_table
from panda_predictor.cli import main
from panda_predictor.settings import load_settings
from tests.bundle_parts import make_bundle

pytestmark = pytest.mark.filterwarnings(
    "ignore:The ``noload`` loader strategy is deprecated:DeprecationWarning"
)

METRICS = {
    "mean_accuracy": 0.80,
    "served.mean_accuracy": 0.82,
    "ramcount.tail_recall": 0.95,
    "ramcount.under_allocation": 0.03,
}
#: What the gate's evidence adds: a replay that meets its goals.
REPLAY = {
    "served.cost": 0.8,
    "served.ramcount.failed_jobs": 0.01,
    "served.ramcount.wasted_hours": 1.0,
    "served.delay_share": 0.1,
}


@pytest.fixture
def three_versions(reg_settings, tmp_path):
    """Versions 1..3; the gate made 1 then 2 champion; 3 is an alias-less version."""
    versions = []
    for n in (1, 2, 3):
        metrics = {**METRICS, "mean_accuracy": 0.70 + n / 100}
        info = register_bundle(
            reg_settings, make_bundle(tmp_path / f"b{n}", str(n)), None, metrics
        )
        versions.append(info.version)
    floors = {
        "majority": {"served.mean_accuracy": 0.1},
        "scouts": {
            "served.cost": 1.5,
            "served.ramcount.failed_jobs": 0.02,
            "served.ramcount.wasted_hours": 1.5,
        },
    }
    gated = {**METRICS, **REPLAY}
    promote_if_not_worse(reg_settings, 1, GateEvidence(gated, floors=floors))
    promote_if_not_worse(
        reg_settings, 2, GateEvidence(gated, champion=METRICS, floors=floors)
    )
    return reg_settings, versions


def run(settings, *args):
    """Run the CLI against ``settings``' store; return the click result."""
    env = {
        "PANDA_PREDICTOR_HOME": str(settings.home),
        "PANDA_PREDICTOR_MLFLOW_TRACKING_URI": settings.tracking_uri(),
        "PANDA_PREDICTOR_OPERATOR": "alice",
    }
    return CliRunner().invoke(main, list(args), env=env, catch_exceptions=False)


def test_list_shows_aliases_created_metrics_and_verdicts(three_versions):
    settings, _ = three_versions
    result = run(settings, "model", "list")
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert lines[1].split()[0] == "3"  # newest first
    by_version = {line.split()[0]: line for line in lines[1:]}
    assert "champion" in by_version["2"] and "previous" in by_version["1"]
    assert "mean_accuracy=0.720" in by_version["2"]
    assert "gate: champion" in by_version["2"]
    assert "not gated" in by_version["3"]


def test_show_prints_params_metrics_tags_and_lineage(three_versions):
    settings, _ = three_versions
    result = run(settings, "model", "show", "2")
    assert result.exit_code == 0, result.output
    out = result.output
    assert "aliases: champion" in out
    assert "replaced champion: version 1" in out
    assert "mean_accuracy = 0.7200" in out
    assert "gate.decision = champion" in out
    assert "run:" in out


def test_show_prints_the_versions_replay_against_the_scouts(three_versions, tmp_path):
    settings, _ = three_versions
    scouts = {"served.ramcount.failed_jobs": 0.02, "served.ramcount.wasted_hours": 1.5}
    metrics = {**METRICS, **replay_metrics(replay_of(REPLAY, scouts))}
    assert metrics["scouts.ramcount.failed_jobs"] == 0.02
    info = register_bundle(settings, make_bundle(tmp_path / "b4", "4"), None, metrics)
    out = run(settings, "model", "show", str(info.version)).output
    block = out.split(f"{HEADING}\n")[1].splitlines()
    cells = block[1].split()
    assert cells == ["ramcount", "0.010", "0.020", "1", "GB-h", "1.5", "GB-h"]
    assert block[2].strip().startswith("Tasks that keep their scouts: 10.0 %")
    # A version registered without the replay shows none.
    assert HEADING not in run(settings, "model", "show", "2").output


def test_promote_then_rollback_moves_alias_and_records_who_when_why(three_versions):
    settings, _ = three_versions
    result = run(settings, "model", "promote", "3", "--reason", "better tails")
    assert result.exit_code == 0, result.output
    assert "champion is now version 3 (was version 2" in result.output
    assert champion_version(settings).version == 3
    assert version_by_alias(settings, "previous").version == 2
    tags = get_version(settings, 3).tags
    assert tags["manual.by"] == "alice"
    assert tags["manual.reason"] == "better tails"
    assert tags["manual.action"] == "promote"
    assert tags["champion.previous"] == "2"
    assert tags["manual.at"].startswith("20")

    result = run(settings, "model", "rollback", "--reason", "failures doubled")
    assert result.exit_code == 0, result.output
    assert champion_version(settings).version == 2
    # 2 replaced 1 (the gate recorded it), so the next rollback would go to 1.
    assert version_by_alias(settings, "previous").version == 1
    assert get_version(settings, 3).tags["manual.rolled_back_reason"] == (
        "failures doubled"
    )
    assert get_version(settings, 2).tags["manual.action"] == "rollback"
    listed = run(settings, "model", "list").output
    assert "rolled back by alice: failures doubled" in listed

    assert run(settings, "model", "rollback", "--reason", "again").exit_code == 0
    assert champion_version(settings).version == 1
    assert version_by_alias(settings, "previous") is None
    result = run(settings, "model", "rollback", "--reason", "once more")
    assert result.exit_code == 1
    assert "needs a previous champion" in result.output


@pytest.mark.parametrize(
    ("args", "match"),
    [
        (("promote", "9", "--reason", "x"), r"registered version .*\(1, 2, 3\)"),
        (("promote", "2", "--reason", "x"), "must not be champion already"),
        (("promote", "3", "--reason", "  "), "--reason must say why"),
        (("promote", "3"), "Missing option '--reason'"),
        (("rollback",), "Missing option '--reason'"),
        (("show", "7"), r"Got 7 instead"),
        (("promote", "zero", "--reason", "x"), "is not a valid integer"),
    ],
    ids=[
        "unknown",
        "already",
        "blank-reason",
        "no-reason",
        "rollback-no-reason",
        "show-unknown",
        "not-a-number",
    ],
)
def test_model_command_errors(three_versions, args, match):
    settings, _ = three_versions
    result = run(settings, "model", *args)
    assert result.exit_code != 0
    import re

    assert re.search(match, result.output), result.output
    assert champion_version(settings).version == 2  # nothing moved


def test_rollback_without_previous_champion(reg_settings, tmp_path):
    register_bundle(reg_settings, make_bundle(tmp_path / "b", "1"), None, METRICS)
    with pytest.raises(ManualModelError, match="Got none instead"):
        rollback(reg_settings, "why")


def test_list_on_empty_store_and_missing_store(reg_settings, tmp_path):
    assert "No versions" in run(reg_settings, "model", "list").output
    missing = load_settings(
        home=tmp_path / "nowhere",
        mlflow_tracking_uri=f"sqlite:///{tmp_path}/nowhere/mlflow.db",
    )
    result = run(missing, "model", "list")
    assert result.exit_code == 1 and "must be an existing SQLite file" in result.output


def test_promote_api_names_the_operator(three_versions):
    settings, _ = three_versions
    move = promote(settings, 3, "test", by="bob")
    assert move.by == "bob" and move.replaced == 2
    assert get_version(settings, 3).tags["manual.by"] == "bob"


def test_operator_setting_wins_over_the_login_name(monkeypatch, tmp_path):
    """PANDA_PREDICTOR_OPERATOR is the ``operator`` setting; blank means the login."""
    monkeypatch.setenv("PANDA_PREDICTOR_OPERATOR", "carol")
    assert operator(load_settings(home=tmp_path)) == "carol"
    login = operator(load_settings(home=tmp_path, operator=None))
    assert login not in ("", "carol")
    assert operator(load_settings(home=tmp_path, operator="  ")) == login


def test_help_has_examples():
    result = CliRunner().invoke(main, ["model", "--help"])
    assert result.exit_code == 0
    assert "panda-predictor model promote 4 --reason" in result.output
    for sub in ("list", "show", "promote", "rollback"):
        assert sub in result.output


# --- tolerances ---------------------------------------------------------------


def test_parse_tolerances_maps_short_names():
    assert parse_tolerances(["accuracy=0.02", "under_allocation = 0.1"]) == {
        "max_accuracy_drop": 0.02,
        "max_under_allocation_rise": 0.1,
    }
    assert parse_tolerances(["floor_noise_factor=-1"]) == {"floor_noise_factor": -1.0}


@pytest.mark.parametrize(
    ("item", "match"),
    [
        ("accuracy", "must be NAME=VALUE"),
        ("speed=0.1", r"NAME one of accuracy, .*Got 'speed=0.1'"),
        ("accuracy=lots", r"'accuracy' must be a finite number >= 0. Got 'lots'"),
        ("accuracy=-0.1", r"finite number >= 0. Got '-0.1'"),
        ("tail_recall=nan", "finite number"),
        ("floor_noise_factor=-2", r">= -1. Got '-2'"),
    ],
    ids=["no-value", "unknown-name", "not-number", "negative", "nan", "below-minus-1"],
)
def test_parse_tolerances_errors(item, match):
    with pytest.raises(ToleranceError, match=match):
        parse_tolerances([item])


def test_tolerances_come_from_settings_then_overrides(tmp_path):
    settings = load_settings(home=tmp_path, gate_max_accuracy_drop=0.03)
    assert GateThresholds.from_settings(settings).max_accuracy_drop == 0.03
    both = GateThresholds.from_settings(settings, ["accuracy=0.04", "tail_recall=0.2"])
    assert both.max_accuracy_drop == 0.04 and both.max_tail_recall_drop == 0.2
    assert both.max_under_allocation_rise == settings.gate_max_under_allocation_rise


def test_a_tolerance_turns_a_refusal_into_a_promotion():
    champion = {"ramcount.under_allocation": 0.168}
    challenger = {"ramcount.under_allocation": 0.185}  # 0.017 worse
    evidence = GateEvidence(challenger, champion=champion)
    strict = judge(evidence, GateThresholds())
    loose = judge(
        evidence, GateThresholds(**parse_tolerances(["under_allocation=0.02"]))
    )
    assert not strict[0].passed and loose[0].passed


def test_verdict_table_prints_champion_challenger_diff_and_tolerance():
    evidence = GateEvidence(
        {"mean_accuracy": 0.70, "ramcount.tail_recall": 0.90},
        champion={"mean_accuracy": 0.72, "ramcount.tail_recall": 0.90},
        noise={"champion": {"mean_accuracy": 0.004}},
    )
    lines = verdict_table(judge(evidence, GateThresholds(max_accuracy_drop=0.01)))
    assert lines[0].split() == [
        "metric",
        "better",
        "champion",
        "challenger",
        "diff",
        "tolerance",
        "noise",
        "floor",
        "verdict",
    ]
    row = next(line for line in lines if line.startswith("mean_accuracy"))
    assert row.split() == [
        "mean_accuracy",
        "higher",
        "0.7200",
        "0.7000",
        "-0.0200",
        "0.0100",
        "0.0040",
        "WORSE",
    ]
    tail = next(line for line in lines if line.startswith("ramcount.tail_recall"))
    assert tail.split()[-1] == "ok" and "+0.0000" in tail


def test_decision_table_has_the_reason_first():
    decision = GateDecision(4, "challenger", False, 3, "worse than champion on x")
    assert decision.table() == ["version 4 -> challenger: worse than champion on x"]


def test_cli_rejects_a_bad_tolerance_before_training(reg_settings):
    result = run(reg_settings, "train", "--gate-tolerance", "accuracy=much")
    assert result.exit_code == 1
    assert "'accuracy' must be a finite number" in result.output


def test_list_runs_on_the_settings_it_is_given_newest_first(three_versions):
    from panda_predictor.cli.model import model

    settings, versions = three_versions
    result = CliRunner().invoke(model, ["list"], obj=settings)

    assert result.exit_code == 0, result.output
    header, *rows = result.output.splitlines()
    assert header.split()[:2] == ["version", "aliases"]
    assert [row.split()[0] for row in rows] == [str(v) for v in reversed(versions)]
    assert rows[1].split()[1] == "champion"
