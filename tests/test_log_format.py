"""People-facing log output: one line per task, JSON lines, clear level errors."""

from __future__ import annotations

import io
import json
import logging
import re

import pytest
from click.testing import CliRunner

from panda_predictor.cli import main
from panda_predictor.hook.submit import SubmitHook
from panda_predictor.log_format import (
    JsonFormatter,
    LogSettingsError,
    check_level,
    configure_logging,
    log_task,
)
from panda_predictor.serving.bundle import load_bundle
from panda_predictor.serving.predictor import Predictor
from tests.history_parts import load_simulated_panda

N_DEFINED = 10


@pytest.fixture
def history_db(settings, seed):
    """Return settings of a database with a small simulated history + new tasks."""
    return load_simulated_panda(settings, seed, n_tasks=300, n_defined=N_DEFINED)


@pytest.fixture(scope="module")
def predictor(trained_bundle_dir):
    return Predictor(load_bundle(trained_bundle_dir), "panda-predictor", "7")


def test_hook_logs_each_task_once_with_version_decision_and_reason(
    history_db, predictor, caplog
):
    hook = SubmitHook(
        history_db, predictor_factory=lambda: predictor, history_factory=lambda: None
    )
    with caplog.at_level(logging.DEBUG):
        report = hook.run_once()
    hook.engine.dispose()
    assert report.failure is None and report.written == N_DEFINED
    task_lines = [r for r in caplog.records if r.getMessage().startswith("jediTaskID=")]
    # DEBUG lines of other modules may name a task, but only at DEBUG; the
    # INFO-and-above per-task lines are the hook's, one per task.
    shown = [r for r in task_lines if r.levelno >= logging.INFO]
    ids = [r.jediTaskID for r in shown]
    assert sorted(ids) == sorted(report.applied + report.kept_scouts)
    assert len(ids) == len(set(ids))
    assert {r.name for r in shown} == {"panda_predictor.hook"}
    by_id = {p.jeditaskid: p for p in report.predictions}
    for record in shown:
        message = record.getMessage()
        prediction = by_id[record.jediTaskID]
        assert re.match(
            rf"jediTaskID={record.jediTaskID} model=panda-predictor version=7 "
            rf"decision={prediction.decision} reason=",
            message,
        ), message
        # The write's own notes (resource type, scout cap, ...) may follow.
        assert f"reason={prediction.reason}" in message
        assert record.model_version == "7"


def test_json_formatter_puts_task_fields_as_keys():
    stream = io.StringIO()
    logger = logging.getLogger("test.json.lines")
    handler = logging.StreamHandler(stream)
    handler.setFormatter(JsonFormatter())
    logger.addHandler(handler)
    logger.propagate = False
    logger.setLevel(logging.INFO)
    try:
        log_task(logger, logging.INFO, 42, ("m", "3"), "applied", "confident: 0.91")
        logger.warning("plain %s", "line")
    finally:
        logger.removeHandler(handler)
    first, second = (json.loads(line) for line in stream.getvalue().splitlines())
    assert first["jediTaskID"] == 42
    assert first["model_version"] == "3" and first["model"] == "m"
    assert first["decision"] == "applied"
    assert first["reason"] == "confident: 0.91"
    assert first["level"] == "INFO" and first["logger"] == "test.json.lines"
    assert first["msg"].startswith("jediTaskID=42 model=m version=3")
    assert re.match(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}\+00:00$", first["ts"])
    assert second["msg"] == "plain line" and "jediTaskID" not in second


def test_cli_json_log_format_writes_json_lines(tmp_path):
    root = logging.getLogger()
    saved = (list(root.handlers), root.level)
    runner = CliRunner()
    try:
        result = runner.invoke(
            main,
            [
                "--log-format",
                "json",
                "--log-level",
                "info",
                "db",
                "init",
                "--with-panda-tables",
            ],
            env={"PANDA_PREDICTOR_HOME": str(tmp_path)},
        )
    finally:
        root.handlers[:], root.level = saved
    assert result.exit_code == 0, result.output
    lines = [
        json.loads(line) for line in result.stderr.splitlines() if line.startswith("{")
    ]
    assert lines, result.stderr
    assert all({"ts", "level", "logger", "msg"} <= set(line) for line in lines)


@pytest.mark.parametrize(
    "args, env",
    [
        (["--log-level", "loud", "db", "--help"], {}),
        (["db", "--help"], {"PANDA_PREDICTOR_LOG_LEVEL": "loud"}),
    ],
    ids=["option", "environment"],
)
def test_invalid_log_level_is_one_clear_line(args, env):
    result = CliRunner().invoke(main, args, env=env)
    assert result.exit_code == 1
    assert result.exception is None or isinstance(result.exception, SystemExit)
    message = result.output.strip()
    assert "Traceback" not in message
    assert len(message.splitlines()) == 1
    assert "log_level" in message and "'loud'" in message
    assert "DEBUG, INFO, WARNING, ERROR" in message


@pytest.mark.parametrize(
    "level, match",
    [("verbose", "must be one of DEBUG"), ("", "Got '' instead")],
    ids=["unknown", "empty"],
)
def test_check_level_refuses_unknown_names(level, match):
    with pytest.raises(LogSettingsError, match=match):
        check_level(level)


def test_configure_logging_replaces_handlers_instead_of_adding():
    root = logging.getLogger()
    saved = (list(root.handlers), root.level)
    try:
        configure_logging("warning", "text", io.StringIO())
        configure_logging("warning", "json", io.StringIO())
        assert len(root.handlers) == 1
        assert isinstance(root.handlers[0].formatter, JsonFormatter)
        assert root.level == logging.WARNING
    finally:
        root.handlers[:], root.level = saved
