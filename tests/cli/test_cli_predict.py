"""``panda-predictor predict`` with click's CliRunner and a real trained bundle."""

from __future__ import annotations

import json

import pytest
import yaml
from click.testing import CliRunner

from panda_predictor.cli.predict import predict
from panda_predictor.settings import load_settings

TASK = {
    "taskName": "mc23.simul.check",
    "processingType": "simul",
    "prodSourceLabel": "managed",
    "transPath": "Sim_tf.py",
    "transHome": "AtlasOffline-23.0.5",
    "coreCount": 8,
}
TARGETS = ("ramcount", "cputime", "iointensity", "walltime")


@pytest.fixture
def settings(tmp_path):
    return load_settings(
        home=tmp_path, mlflow_tracking_uri=f"sqlite:///{tmp_path / 'mlflow.db'}"
    )


def _run(settings, args, stdin=None):
    return CliRunner().invoke(predict, args, obj=settings, input=stdin)


def test_json_file_prints_every_target_and_the_decision(
    tmp_path, settings, trained_bundle_dir
):
    path = tmp_path / "task.json"
    path.write_text(json.dumps(TASK))
    result = _run(settings, [str(path), "--bundle", str(trained_bundle_dir)])
    assert result.exit_code == 0, result.output
    assert "Scouts would be" in result.output
    for target in TARGETS:
        assert target in result.output
    assert "MBPerCore" in result.output
    assert "Features that drove it" in result.output


def test_yaml_list_with_json_output_is_machine_readable(
    tmp_path, settings, trained_bundle_dir
):
    path = tmp_path / "tasks.yaml"
    path.write_text(yaml.safe_dump([TASK, dict(TASK, coreCount=1)]))
    result = _run(settings, [str(path), "--json", "--bundle", str(trained_bundle_dir)])
    assert result.exit_code == 0, result.output
    predictions = json.loads(result.output)["predictions"]
    assert len(predictions) == 2
    assert set(predictions[0]["targets"]) == set(TARGETS)
    assert predictions[0]["model"]["version"] == "local"
    assert predictions[0]["targets"]["ramcount"]["top_features"]


def test_stdin_is_read_for_dash(settings, trained_bundle_dir):
    result = _run(
        settings,
        ["-", "--json", "--bundle", str(trained_bundle_dir)],
        stdin=json.dumps(TASK),
    )
    assert result.exit_code == 0, result.output
    assert len(json.loads(result.output)["predictions"]) == 1


@pytest.mark.parametrize(
    ("name", "content", "match"),
    [
        (
            "task.json",
            json.dumps(dict(TASK, coreCount=-2)),
            "The 'coreCount' field must be a positive integer. Got -2 instead.",
        ),
        ("task.json", json.dumps(dict(TASK, transPth="x")), "The 'transPth' field"),
        ("task.json", '{"coreCount": 8,', "must hold JSON"),
        ("task.yaml", "coreCount: [8", "must hold YAML"),
        ("task.txt", "{}", "must end in .json, .yaml or .yml"),
    ],
    ids=[
        "negative-corecount",
        "unknown-field",
        "malformed-json",
        "malformed-yaml",
        "wrong-suffix",
    ],
)
def test_bad_task_files_fail_with_one_clear_line(
    tmp_path, settings, trained_bundle_dir, name, content, match
):
    path = tmp_path / name
    path.write_text(content)
    result = _run(settings, [str(path), "--bundle", str(trained_bundle_dir)])
    assert result.exit_code == 1
    assert match in result.output
    assert "Traceback" not in result.output


def test_missing_file_is_reported(settings, tmp_path):
    result = _run(settings, [str(tmp_path / "nope.json")])
    assert result.exit_code == 1
    assert "must exist" in result.output


def test_without_bundle_and_without_champion_says_so(tmp_path, settings):
    path = tmp_path / "task.json"
    path.write_text(json.dumps(TASK))
    result = _run(settings, [str(path)])
    assert result.exit_code == 1
    assert "No champion" in result.output
