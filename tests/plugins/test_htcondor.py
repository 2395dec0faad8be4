"""HTCondor submit attributes and job transforms, checked with the real bindings."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import datetime

import classad2
import htcondor2
import pytest
from click.testing import CliRunner

from panda_predictor.cli.htcondor import htcondor as htcondor_command
from panda_predictor.core.domain.task_prediction import TargetPrediction, TaskPrediction
from panda_predictor.plugins.htcondor import (
    JobShape,
    TaskTransform,
    apply_to_submit,
    job_transform,
    memory_mb,
    submit_attributes,
    transform_for,
    walltime_seconds,
)


def _target(name, value, unit, upper=None):
    return TargetPrediction(name, 2, "x", 0.0, upper, value, unit, 0.9, (0.1, 0.9))


def prediction(decision="applied", cputime=("cputime", 25, "HS06sPerEvent")):
    return TaskPrediction(
        jeditaskid=4000123,
        model_name="panda-predictor",
        model_version="2",
        decision=decision,
        reason="confident",
        targets={
            "ramcount": _target("ramcount", 3000, "MBPerCore"),
            "cputime": _target(*cputime),
            "iointensity": _target("iointensity", 500, "kBPerS"),
        },
    )


SHAPE = JobShape(core_count=8, events_per_job=1000, base_ram_mb=500, disk_mb=2000)


def test_panda_formulas():
    # ramCount * coreCount + baseRamCount
    assert memory_mb(3000, SHAPE) == 24500
    # 25 * 1000 / 8 / 10 / 0.9 = 347.2 s, + 600 s base walltime
    assert walltime_seconds(25, SHAPE) == 948
    assert walltime_seconds(25, JobShape(core_count=8)) is None


def test_submit_attributes_of_an_applied_prediction():
    assert submit_attributes(prediction(), SHAPE) == {
        "request_cpus": "8",
        "request_disk": str(2000 * 1024),
        "request_memory": "24500",
        "allowed_job_duration": "948",
        "+MaxWallTimeMins": "16",
    }


def test_milli_and_fixed_cputime_units():
    milli = prediction(cputime=("cputime", 25000, "mHS06sPerEventFixed"))
    assert submit_attributes(milli, SHAPE)["allowed_job_duration"] == "948"


def test_kept_scouts_requests_no_memory_or_time():
    kept = prediction("kept_scouts")
    assert submit_attributes(kept, SHAPE) == {
        "request_cpus": "8",
        "request_disk": "2048000",
    }
    assert "request_memory" in submit_attributes(kept, SHAPE, only_applied=False)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        pytest.param(
            {"core_count": 0}, "'core_count' field must be a positive", id="zero-cores"
        ),
        pytest.param(
            {"events_per_job": -5},
            "'events_per_job' field must be a pos",
            id="negative-events",
        ),
        pytest.param(
            {"base_ram_mb": -1},
            "'base_ram_mb' field must be a non-neg",
            id="negative-base-ram",
        ),
        pytest.param(
            {"cpu_efficiency": 120},
            "'cpu_efficiency' field must be a per",
            id="efficiency-over-100",
        ),
        pytest.param(
            {"core_power": 0},
            "'core_power' field must be a positive",
            id="zero-core-power",
        ),
    ],
)
def test_job_shape_rejects_bad_values(kwargs, match):
    with pytest.raises(ValueError, match=match):
        JobShape(**kwargs)


def test_apply_to_a_real_submit_object():
    submit = htcondor2.Submit({"executable": "/bin/runGen", "request_memory": "4000"})
    written = apply_to_submit(submit, submit_attributes(prediction(), SHAPE))

    assert "request_memory" not in written  # the submitter's own request wins
    assert submit.expand("request_memory") == "4000"
    assert submit.expand("request_cpus") == "8"
    assert submit.expand("request_disk") == "2048000"
    assert submit.expand("allowed_job_duration") == "948"
    assert "+MaxWallTimeMins = 16" in str(submit)

    apply_to_submit(submit, submit_attributes(prediction(), SHAPE), overwrite=True)
    assert submit.expand("request_memory") == "24500"


def test_apply_keeps_a_my_dot_attribute():
    submit = htcondor2.Submit({"executable": "/bin/true", "MY.MaxWallTimeMins": "5"})
    written = apply_to_submit(submit, {"+MaxWallTimeMins": "16"})
    assert written == {}
    assert "MaxWallTimeMins = 5" in str(submit)


def _condor_param(tmp_path, snippet, names):
    """Return the config values of ``names`` as the real bindings read the file."""
    config = tmp_path / "condor_config"
    config.write_text("JOB_TRANSFORM_NAMES = SITE_DEFAULTS\n" + snippet)
    code = (
        "import json, sys, htcondor2\n"
        "print(json.dumps({n: htcondor2.param.get(n) for n in sys.argv[1:]}))\n"
    )
    env = dict(os.environ, CONDOR_CONFIG=str(config))
    out = subprocess.run(
        [sys.executable, "-c", code, *names],
        env=env,
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    return json.loads(out)


def test_job_transform_parses_with_the_real_config_reader(tmp_path):
    snippet = job_transform(
        [
            transform_for(4000123, prediction(), SHAPE),
            TaskTransform(4000124, {"request_memory": "2000"}),
        ],
        task_attribute="PandaTaskID",
    )
    values = _condor_param(
        tmp_path,
        snippet,
        [
            "JOB_TRANSFORM_NAMES",
            "JOB_TRANSFORM_PANDA_PREDICTOR_4000123",
            "JOB_TRANSFORM_PANDA_PREDICTOR_4000124",
        ],
    )
    assert values["JOB_TRANSFORM_NAMES"].split() == [
        "SITE_DEFAULTS",
        "PANDA_PREDICTOR_4000123",
        "PANDA_PREDICTOR_4000124",
    ]
    body = values["JOB_TRANSFORM_PANDA_PREDICTOR_4000123"].splitlines()
    assert body == [
        "REQUIREMENTS PandaTaskID == 4000123",
        "SET RequestDisk 2048000",
        "SET AllowedJobDuration 948",
        "SET MaxWallTimeMins 16",
        "EVALSET RequestMemory ceiling(3000 * RequestCpus + 500)",
    ]
    # Every expression is a ClassAd expression that evaluates against a job.
    job = classad2.ClassAd({"PandaTaskID": 4000123, "RequestCpus": 4})
    other = classad2.ClassAd({"PandaTaskID": 7, "RequestCpus": 4})
    requirement = classad2.ExprTree(body[0].split(" ", 1)[1])
    assert requirement.eval(job) is True and requirement.eval(other) is False
    memory = classad2.ExprTree(body[-1].split(" ", 2)[2])
    assert memory.eval(job) == 4 * 3000 + 500
    for line in body[1:-1]:
        _, attribute, value = line.split(" ")
        assert classad2.ExprTree(value).eval() == int(value)


@pytest.mark.parametrize(
    ("transforms", "kwargs", "match"),
    [
        pytest.param([], {}, "'transforms' field must hold at least one", id="none"),
        pytest.param(
            [TaskTransform(0, {})],
            {},
            "'jediTaskID' field must be a pos",
            id="bad-task-id",
        ),
        pytest.param(
            [TaskTransform(1, {"request_gpus": "1"})],
            {},
            "submit attribute must be one of",
            id="unknown-attribute",
        ),
        pytest.param(
            [TaskTransform(1, {"request_memory": "1; rm"})],
            {},
            "'request_memory' value must be a number",
            id="not-a-number",
        ),
        pytest.param(
            [TaskTransform(1, {})],
            {"task_attribute": "Task ID"},
            "'task_attribute' field must be a ClassAd attribute name",
            id="bad-attribute-name",
        ),
    ],
)
def test_job_transform_rejects_bad_input(transforms, kwargs, match):
    with pytest.raises(ValueError, match=match):
        job_transform(transforms, **kwargs)


def test_cli_from_a_task_file(trained_bundle_dir, tmp_path):
    from panda_predictor.settings import load_settings

    task = tmp_path / "task.json"
    task.write_text(
        json.dumps(
            {
                "processingType": "simul",
                "transPath": "Sim_tf.py",
                "transHome": "AthSimulation-24.0.1",
                "transUses": "Atlas-24.0.1",
                "prodSourceLabel": "managed",
                "coreCount": 8,
                "nEventsPerJob": 500,
            }
        )
    )
    settings = load_settings(home=tmp_path)
    runner = CliRunner()
    result = runner.invoke(
        htcondor_command,
        [str(task), "--bundle", str(trained_bundle_dir), "--all-decisions"],
        obj=settings,
    )
    assert result.exit_code == 0, result.output
    lines = dict(line.split(" = ") for line in result.output.splitlines()[1:])
    assert lines["request_cpus"] == "8"
    assert int(lines["request_memory"]) > 0
    assert int(lines["allowed_job_duration"]) >= 600
    assert int(lines["+MaxWallTimeMins"]) == -(
        -int(lines["allowed_job_duration"]) // 60
    )


@pytest.mark.parametrize(
    ("args", "match"),
    [
        pytest.param([], "Give either TASK_FILE or --task-id", id="nothing"),
        pytest.param(
            ["--task-id", "999"],
            "must have been predicted by the hook",
            id="no-audit-row",
        ),
    ],
)
def test_cli_errors(settings, args, match):
    from panda_predictor.db.engine import make_engine
    from panda_predictor.db.migrations import init_database

    engine = make_engine(settings)
    init_database(engine, settings, with_panda_tables=True)
    engine.dispose()
    result = CliRunner().invoke(htcondor_command, args, obj=settings)
    assert result.exit_code != 0
    assert match in result.output


def test_cli_from_the_audit_row(settings):
    """The hook's audit row and JEDI_TASKS give the requests (SQLite and PostgreSQL)."""
    from panda_predictor.db.engine import get_panda_tables, make_engine
    from panda_predictor.db.migrations import init_database
    from panda_predictor.db.writer import write_predictions

    engine = make_engine(settings)
    init_database(engine, settings, with_panda_tables=True)
    tasks = get_panda_tables(settings, engine).jedi_tasks
    with engine.begin() as conn:
        conn.execute(
            tasks.insert().values(
                jeditaskid=4000123,
                status="defined",
                splitrule="US=2,NE=1000",
                corecount=8,
                baseramcount=500,
                creationdate=datetime(2026, 1, 5),
                processingtype="simul",
                prodsourcelabel="managed",
            )
        )
        result = write_predictions(conn, settings, [prediction()])
    engine.dispose()
    assert result.applied == [4000123]

    runner = CliRunner()
    out = runner.invoke(htcondor_command, ["--task-id", "4000123"], obj=settings)
    assert out.exit_code == 0, out.output
    assert "decision=applied" in out.output
    assert "request_memory = 24500" in out.output
    assert "allowed_job_duration = 948" in out.output
    transform = runner.invoke(
        htcondor_command, ["--task-id", "4000123", "--transform"], obj=settings
    )
    assert transform.exit_code == 0, transform.output
    assert "REQUIREMENTS JediTaskID == 4000123" in transform.output
    assert "EVALSET RequestMemory ceiling(3000 * RequestCpus + 500)" in (
        transform.output
    )
