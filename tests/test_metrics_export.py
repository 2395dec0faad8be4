"""Metrics that reach Prometheus: a watching hook's /metrics, the --once textfile,
and the last drift run on the service's /metrics (read from the database)."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable
from datetime import datetime
from pathlib import Path

import pytest
import sqlalchemy as sa
from click.testing import CliRunner
from prometheus_client import REGISTRY
from prometheus_client.parser import text_string_to_metric_families

from model_registry.registry import register_bundle, set_alias
from panda_predictor.cli import main
from panda_predictor.db.drift_runs import record_drift_run
from panda_predictor.db.engine import get_panda_tables, make_engine
from panda_predictor.db.migrations import init_database
from panda_predictor.http_api import create_app
from panda_predictor.metrics import DRIFT_PSI, DRIFT_VERDICT
from tests.end_to_end.test_cli_pipeline import env_for

ROOT = Path(__file__).resolve().parents[1]
#: Runs the CLI as if on the day after the session's simulated history (see
#: tests/end_to_end/test_cli_pipeline.py: the hook's 180-day history window).
LAUNCHER = (
    "from panda_predictor.serving import recent\n"
    "from tests.end_to_end.test_cli_pipeline import DayAfterTheHistory\n"
    "recent.datetime = DayAfterTheHistory\n"
    "from panda_predictor.cli import main\n"
    "main()\n"
)
HELD_BACK = 6


Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def parse(text: str) -> Samples:
    """Return every sample of a Prometheus text page by (name, sorted labels)."""
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def value(samples: Samples, name: str, **labels: str) -> float | None:
    return samples.get((name, tuple(sorted(labels.items()))))


def total(samples: Samples, name: str, **labels: str) -> float:
    """Return the sum of ``name`` over the series carrying ``labels``."""
    return sum(
        v
        for (n, lab), v in samples.items()
        if n == name and set(labels.items()) <= set(lab)
    )


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def scrape_until(
    url: str, ready: Callable[[Samples], bool], proc, timeout: float = 120
) -> Samples:
    """Scrape ``url`` until ``ready`` holds; fail with the last page otherwise."""
    deadline = time.monotonic() + timeout
    samples: Samples = {}
    while time.monotonic() < deadline:
        assert proc.poll() is None, proc.communicate()[0]
        try:
            with urllib.request.urlopen(url, timeout=5) as response:
                samples = parse(response.read().decode())
        except OSError:
            samples = {}
        if samples and ready(samples):
            return samples
        time.sleep(0.3)
    pytest.fail(f"{url} never showed the expected series; last: {samples}")


@pytest.fixture
def champion_world(fresh_sqlite, empty_mlflow_store, trained_bundle_dir):
    """Return settings of a writable simulated world whose registry has a champion,
    and the ids of its newest defined tasks, held back by JEDI (LOCKEDBY set)."""
    import shutil

    shutil.copyfile(empty_mlflow_store, fresh_sqlite.home / "mlflow.db")
    info = register_bundle(fresh_sqlite, trained_bundle_dir, None, {})
    set_alias(fresh_sqlite, info.version, "champion")
    engine = make_engine(fresh_sqlite)
    t = get_panda_tables(fresh_sqlite, engine).jedi_tasks
    try:
        with engine.begin() as conn:
            defined = sorted(
                conn.execute(
                    sa.select(t.c.jeditaskid).where(
                        t.c.status.in_(["defined", "ready"])
                    )
                ).scalars()
            )
            held = defined[-HELD_BACK:]
            conn.execute(
                t.update().where(t.c.jeditaskid.in_(held)).values(lockedby="jedi")
            )
    finally:
        engine.dispose()
    return fresh_sqlite, defined, held


def release(settings, task_ids) -> None:
    """Let JEDI release ``task_ids`` (LOCKEDBY cleared): they become eligible."""
    engine = make_engine(settings)
    t = get_panda_tables(settings, engine).jedi_tasks
    try:
        with engine.begin() as conn:
            conn.execute(
                t.update().where(t.c.jeditaskid.in_(task_ids)).values(lockedby=None)
            )
    finally:
        engine.dispose()


def test_watching_hook_serves_decision_fallback_and_kill_switch_series(
    champion_world, tmp_path
):
    settings, defined, held = champion_world
    kill = tmp_path / "kill-switch"
    port = free_port()
    env = {
        **os.environ,
        **env_for(settings),
        "PANDA_PREDICTOR_KILL_SWITCH_FILE": str(kill),
        "PYTHONPATH": str(ROOT),
    }
    proc = subprocess.Popen(
        [sys.executable, "-c", LAUNCHER, "hook", "--watch", "--interval", "0.3"]
        + ["--metrics-port", str(port)],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    url = f"http://127.0.0.1:{port}/metrics"
    try:
        # 1. The champion handles every eligible task; decisions are counted.
        first = len(defined) - HELD_BACK

        def first_pass_done(s: Samples) -> bool:
            # The tasks are counted during the pass, the pass at its end: a scrape
            # between the two saw every task and no pass (CI, 2026-12-05).
            passes = value(
                s, "panda_predictor_hook_passes_total", hook="db", outcome="ok"
            )
            return (
                total(s, "panda_predictor_tasks_total", hook="db") >= first
                and (passes or 0) >= 1
            )

        ok = scrape_until(url, first_pass_done, proc)
        applied = value(
            ok, "panda_predictor_tasks_total", hook="db", decision="applied"
        )
        kept = value(
            ok, "panda_predictor_tasks_total", hook="db", decision="kept_scouts"
        )
        assert applied is not None and applied >= 1
        assert applied + kept == first
        assert value(ok, "panda_predictor_kill_switch_on", hook="db") == 0
        passes = value(ok, "panda_predictor_hook_passes_total", hook="db", outcome="ok")
        assert passes is not None and passes >= 1
        last_pass = value(
            ok, "panda_predictor_hook_last_pass_timestamp_seconds", hook="db"
        )
        assert last_pass is not None and abs(last_pass - time.time()) < 60

        # 2. Kill switch on: the released tasks keep their scouts, and it is counted.
        kill.touch()
        release(settings, held[:3])
        on = scrape_until(
            url,
            lambda s: (
                value(s, "panda_predictor_kill_switch_tasks_total", hook="db") == 3
            ),
            proc,
        )
        assert value(on, "panda_predictor_kill_switch_on", hook="db") == 1
        assert value(on, "panda_predictor_kill_switch_passes_total", hook="db") >= 1
        assert (
            value(on, "panda_predictor_tasks_total", hook="db", decision="kept_scouts")
            == kept + 3
        )

        # 3. Kill switch off, champion gone: the pass fails open and is counted.
        kill.unlink()
        from model_registry.tracking import mlflow_client

        mlflow_client(settings).delete_registered_model_alias(
            settings.model_name, "champion"
        )
        release(settings, held[3:])
        failed = scrape_until(
            url,
            lambda s: total(s, "panda_predictor_fallbacks_total", hook="db") >= 1,
            proc,
        )
        assert value(failed, "panda_predictor_kill_switch_on", hook="db") == 0
        assert (
            value(
                failed, "panda_predictor_hook_passes_total", hook="db", outcome="failed"
            )
            >= 1
        )
    finally:
        proc.send_signal(signal.SIGTERM)
        output, _ = proc.communicate(timeout=60)
    assert proc.returncode == 0, output
    assert f"Metrics on http://127.0.0.1:{port}/metrics" in output
    assert "Stopped after" in output


def test_once_writes_the_textfile_also_when_the_pass_fails(fresh_sqlite, tmp_path):
    # No registry store: the pass fails open (exit 3) and the file still comes.
    path = tmp_path / "textfile" / "panda_predictor.prom"
    path.parent.mkdir()
    result = CliRunner().invoke(
        main,
        ["hook", "--once", "--metrics-textfile", str(path)],
        env=env_for(fresh_sqlite),
    )
    assert result.exit_code == 3, result.output
    samples = parse(path.read_text())
    failed = (
        "panda_predictor_hook_passes_total",
        (("hook", "db"), ("outcome", "failed")),
    )
    # The file holds this process's counts at the end of the pass.
    assert samples[failed] == REGISTRY.get_sample_value(
        "panda_predictor_hook_passes_total", {"hook": "db", "outcome": "failed"}
    )
    assert samples[failed] >= 1
    assert total(samples, "panda_predictor_fallbacks_total", hook="db") >= 1
    assert ("panda_predictor_kill_switch_on", (("hook", "db"),)) in samples
    assert not [p for p in path.parent.iterdir() if p != path]  # no temp file left


@pytest.mark.parametrize(
    ("args", "match"),
    [
        (["--metrics-textfile", "{tmp}/pp.txt"], "must end in '.prom'"),
        (["--metrics-textfile", "{tmp}/missing/pp.prom"], "folder must exist"),
        (["--metrics-port", "9464"], "--metrics-port is for --watch"),
        (["--watch", "--metrics-textfile", "{tmp}/pp.prom"], "is for --once"),
    ],
    ids=["suffix", "folder", "port-with-once", "textfile-with-watch"],
)
def test_metrics_options_are_checked_before_any_pass(tmp_path, args, match):
    args = [a.replace("{tmp}", str(tmp_path)) for a in args]
    result = CliRunner().invoke(
        main, ["hook", *args], env={"PANDA_PREDICTOR_HOME": str(tmp_path)}
    )
    assert result.exit_code == 2, result.output
    assert match in result.output


def test_serve_exports_the_last_drift_run_recorded_in_the_database(settings):
    engine = make_engine(settings)
    init_database(engine, settings, with_panda_tables=True)
    features = {
        "corecount": {"psi": 0.42, "threshold": 0.23, "alarm": True},
        "campaign": {"psi": 4.7, "threshold": 0.21, "alarm": False},
    }
    for day, verdict in ((1, "no_drift"), (2, "drift")):
        record_drift_run(
            engine,
            settings,
            verdict=verdict,
            features=features,
            under_allocation={"ramcount": 0.17},
            model_version=3,
            run_at=datetime(2026, 11, day, 6),
        )
    engine.dispose()
    # As if the drift process had set nothing in this one (a fresh service).
    DRIFT_PSI.clear()
    DRIFT_VERDICT.clear()
    app = create_app(settings, predictor_loader=no_model, background_load=False)
    try:
        samples = parse(app.test_client().get("/metrics").get_data(as_text=True))
    finally:
        app.extensions["panda_predictor"].close()
    assert value(samples, "panda_predictor_drift_verdict", verdict="drift") == 1
    assert value(samples, "panda_predictor_drift_verdict", verdict="no_drift") == 0
    assert value(samples, "panda_predictor_drift_detected") == 1
    assert value(samples, "panda_predictor_drift_psi", feature="campaign") == 4.7
    assert (
        value(samples, "panda_predictor_drift_psi_threshold", feature="corecount")
        == 0.23
    )
    assert (
        value(samples, "panda_predictor_drift_feature_can_alarm", feature="campaign")
        == 0
    )
    assert (
        value(samples, "panda_predictor_drift_under_allocation", target="ramcount")
        == 0.17
    )
    assert (
        value(samples, "panda_predictor_drift_last_run_timestamp_seconds")
        == datetime(2026, 11, 2, 6)
        .replace(tzinfo=__import__("datetime").UTC)
        .timestamp()
    )


def no_model():
    """Stand in for a registry without a champion: /metrics must answer anyway."""
    raise LookupError("no champion in this test")
