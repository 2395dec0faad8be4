"""``panda-predictor htcondor``: HTCondor submit attributes or a schedd job transform.

From a task definition (JSON or YAML, predicted with the champion or ``--bundle``)
or from the audit row of a task the hook already predicted (``--task-id``), print
the submit commands (``request_memory``, ``request_cpus``, ``request_disk``,
``allowed_job_duration``, ``+MaxWallTimeMins``) or, with ``--transform``, the schedd
configuration snippet that sets them for the task's jobs.
"""

from __future__ import annotations

import sys
from typing import Any

import click

from panda_predictor.cli.errors import user_errors
from panda_predictor.cli.inputs import predictor_for, read_definitions_file
from panda_predictor.core.domain.task_prediction import TargetPrediction, TaskPrediction
from panda_predictor.errors import UserInputError
from panda_predictor.settings import Settings

#: PanDA's defaults for a job when the task does not say otherwise.
_DEFAULT_JOB: dict[str, Any] = {
    "core_count": 1,
    "events_per_job": None,
    "base_ram_mb": 0,
    "cpu_efficiency": 90.0,
    "base_walltime": 600,
    "disk_mb": None,
}


def _read_definition(task_file: str) -> dict[str, Any]:
    """Return the one task definition in ``task_file`` ('-' for stdin)."""
    text = sys.stdin.read() if task_file == "-" else None
    data = read_definitions_file(task_file, text)
    if not isinstance(data, dict):
        raise UserInputError(
            f"The task file must hold one task definition (an object). "
            f"Got {type(data).__name__} instead."
        )
    return data


def prediction_from_audit(row: dict[str, Any]) -> TaskPrediction:
    """Return the TaskPrediction stored in an audit row (values in PanDA's units)."""
    targets = {}
    for name in ("ramcount", "cputime", "iointensity", "walltime"):
        if row.get(f"{name}_value") is None:
            continue
        targets[name] = TargetPrediction(
            target=name,
            class_index=int(row.get(f"{name}_class") or 0),
            class_label="",
            lower=None,
            upper=None,
            value=int(row[f"{name}_value"]),
            unit=str(row[f"{name}_unit"]),
            confidence=float(row.get(f"{name}_confidence") or 0.0),
            probabilities=(),
        )
    return TaskPrediction(
        jeditaskid=int(row["jeditaskid"]),
        model_name=str(row["model_name"]),
        model_version=str(row["model_version"]),
        decision=row["decision"],
        reason=str(row.get("reason") or ""),
        targets=targets,
    )


def _job_of_task(
    settings: Settings, task_id: int
) -> tuple[TaskPrediction, dict[str, Any]]:
    import sqlalchemy as sa

    from panda_predictor.core.domain.splitrule import parse_split_rule
    from panda_predictor.db.audit import read_audit
    from panda_predictor.db.engine import get_panda_tables, make_engine

    engine = make_engine(settings)
    try:
        row = read_audit(engine, settings, task_id)
        if row is None:
            raise UserInputError(
                f"The task {task_id} must have been predicted by the hook (an audit "
                "row). Got no audit row instead: run 'panda-predictor hook "
                f"--task-id {task_id}' first."
            )
        t = get_panda_tables(settings, engine).jedi_tasks
        query = (
            sa.select(
                t.c.corecount,
                t.c.splitrule,
                t.c.baseramcount,
                t.c.cpuefficiency,
                t.c.basewalltime,
                t.c.workdiskcount,
            )
            .where(t.c.jeditaskid == sa.bindparam("task_id"))
            .prefix_with("/* cli.htcondor._job_of_task */", dialect="*")
        )
        with engine.connect() as conn:
            task = conn.execute(query, {"task_id": task_id}).mappings().first()
    finally:
        engine.dispose()
    job = dict(_DEFAULT_JOB)
    if task is not None:
        rules = parse_split_rule(task["splitrule"])
        job.update(
            core_count=int(task["corecount"] or 1),
            events_per_job=int(rules["NE"]) if rules.get("NE") else None,
            base_ram_mb=int(task["baseramcount"] or 0),
            cpu_efficiency=float(task["cpuefficiency"] or 90.0),
            base_walltime=int(task["basewalltime"] or 600),
        )
    return prediction_from_audit(row), job


@click.command("htcondor")
@click.argument("task_file", required=False)
@click.option(
    "--task-id",
    type=int,
    default=None,
    help="Use the hook's audit row of this JEDITASKID instead of a file.",
)
@click.option(
    "--bundle",
    type=click.Path(exists=True, file_okay=False),
    default=None,
    help="Predict with this bundle folder, not the champion.",
)
@click.option(
    "--cores",
    type=click.IntRange(min=1),
    default=None,
    help="Cores per job (default: the task's coreCount, else 1).",
)
@click.option(
    "--events-per-job",
    type=click.IntRange(min=1),
    default=None,
    help="Events per job, for the walltime limit (default: nEventsPerJob "
    "or the task's NE= split rule).",
)
@click.option(
    "--disk-mb",
    type=click.IntRange(min=1),
    default=None,
    help="Scratch disk per job in MB (request_disk).",
)
@click.option(
    "--core-power",
    type=float,
    default=10.0,
    show_default=True,
    help="HS06 per core of the site.",
)
@click.option(
    "--transform",
    is_flag=True,
    help="Print a schedd job transform instead of submit commands.",
)
@click.option(
    "--task-attribute",
    default="JediTaskID",
    show_default=True,
    help="Job attribute holding the jediTaskID (for --transform).",
)
@click.option(
    "--all-decisions",
    is_flag=True,
    help="Also request the predicted resources when scouts were kept.",
)
@click.pass_obj
def htcondor(
    settings: Settings,
    task_file: str | None,
    task_id: int | None,
    bundle: str | None,
    cores: int | None,
    events_per_job: int | None,
    disk_mb: int | None,
    core_power: float,
    transform: bool,
    task_attribute: str,
    all_decisions: bool,
) -> None:
    """Print HTCondor submit commands (or a schedd transform) for a task.

    TASK_FILE is a task definition (.json, .yaml or .yml, '-' for stdin; PanDA
    parameter-map names accepted); or use --task-id for a task the hook predicted.
    Only confident ('applied') predictions request memory and time, unless
    --all-decisions.

    \b
    Examples:
      panda-predictor htcondor task.json --events-per-job 1000
      panda-predictor htcondor --task-id 4000123 --transform > 99-pp.config
    """
    from panda_predictor.plugins.htcondor import (
        JobShape,
        job_transform,
        submit_attributes,
        transform_for,
    )

    if (task_file is None) == (task_id is None):
        raise click.UsageError("Give either TASK_FILE or --task-id.")
    with user_errors():
        if task_file is not None:
            prediction, job = _job_of_file(settings, task_file, bundle)
        else:
            assert task_id is not None
            prediction, job = _job_of_task(settings, task_id)
        job["core_count"] = cores or job["core_count"]
        job["events_per_job"] = events_per_job or job["events_per_job"]
        job["disk_mb"] = disk_mb
        shape = JobShape(core_power=core_power, **job)
        if transform:
            if prediction.decision != "applied" and not all_decisions:
                raise click.ClickException(
                    f"jediTaskID={prediction.jeditaskid} kept its scouts "
                    f"({prediction.reason}): no transform (use --all-decisions)."
                )
            entry = transform_for(
                prediction.jeditaskid, prediction, shape, only_applied=False
            )
            click.echo(job_transform([entry], task_attribute), nl=False)
            return
        attributes = submit_attributes(prediction, shape, not all_decisions)
    click.echo(
        f"# jediTaskID={prediction.jeditaskid} decision={prediction.decision}"
        f" ({prediction.reason}) model={prediction.model_name}/"
        f"{prediction.model_version}"
    )
    for key, value in attributes.items():
        click.echo(f"{key} = {value}")


def _job_of_file(
    settings: Settings, task_file: str, bundle: str | None
) -> tuple[TaskPrediction, dict[str, Any]]:
    """Predict the task of a definition file; return it and its job's shape."""
    from panda_predictor.serving.decision import decide
    from panda_predictor.taskdef import read_task_definitions

    data = _read_definition(task_file)
    frame = read_task_definitions(data)
    # The one decision, routed through shadow mode and the rollout share as
    # the hooks route it; a task file is predicted without history.
    prediction = decide(
        predictor_for(settings, bundle),
        frame,
        None,
        rollout=(settings.mode, settings.rollout_share),
    )[0]
    job = dict(_DEFAULT_JOB)
    # Passed as given: JobShape rejects what is not a count, in one line.
    job["core_count"] = data.get("coreCount", data.get("corecount")) or 1
    job["events_per_job"] = data.get("nEventsPerJob")
    job["base_ram_mb"] = data.get("baseRamCount") or 0
    return prediction, job
