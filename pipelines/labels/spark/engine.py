"""The scout formulas as Spark column expressions, the same arithmetic as numpy's.

:func:`panda_predictor.core.labels.labels_frame` is the reference. Each per-job
expression here repeats its operations in the same order on doubles, so the
results are equal bit for bit (the JVM and numpy both round IEEE 754 doubles to
nearest). Quantiles are exact: per task, the sorted values and numpy's linear
interpolation from the nearer end (:func:`_quantile`), not Spark's approximate
``percentile_approx``. NULL plays numpy's NaN: ignored by max and quantile.

Only the per-task aggregates (a few numbers per task) leave the cluster; the
margins, rounding and units are applied by
:func:`~panda_predictor.core.label_values.finalize_labels`, the function the Python and
SQL paths use too.
"""

from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import Any

import pandas as pd

from panda_predictor.core.label_values import (
    DEFAULT_LABEL_PARAMS,
    RAM_FIXED_UNIT,
    RAM_PER_CORE_UNIT,
    LabelParams,
    labels_from_aggregates,
)
from panda_predictor.core.labels import (
    BYTES_PER_INPUT_MB,
    FINISHED_FILE,
    INPUT_COLUMNS,
    INPUT_FILE_TYPES,
    JOB_COLUMNS,
    PSEUDO_INPUT_TYPE,
    TASK_COLUMNS,
)
from panda_predictor.errors import UserInputError
from pipelines.labels.spark.progress import spark_progress

log = logging.getLogger(__name__)

#: Folders of the export (see :mod:`pipelines.export.layout`) the labels read.
JOBS_FOLDER, TASKS_FOLDER = "jobsarchived4", "jedi_tasks"
#: PanDA's job archive (JOBSARCHIVED), read with the jobs where the export has it.
ARCHIVE_FOLDER = "jobsarchived"
#: The dataset files and the datasets (their MASTERID), where the export has files.
CONTENTS_FOLDER, DATASETS_FOLDER = "jedi_dataset_contents", "jedi_datasets"
#: Columns of JEDI_DATASET_CONTENTS the labels read.
CONTENTS_COLUMNS = (
    "jeditaskid",
    "datasetid",
    "type",
    "status",
    "fsize",
    "nevents",
    "startevent",
    "endevent",
    "pandaid",
)


def _quantile(values: Any, q: float) -> Any:
    """Return the ``q`` quantile of a sorted array column as ``group_quantile`` does."""
    from pyspark.sql import functions as F

    n = F.size(values)
    virtual = (n - 1) * F.lit(q)
    below = F.floor(virtual)
    above = F.least(below + 1, n - 1)
    frac = virtual - below
    a = F.element_at(values, (below + 1).cast("int"))
    b = F.element_at(values, (above + 1).cast("int"))
    diff = b - a
    lerp = F.when(frac >= 0.5, b - diff * (1 - frac)).otherwise(a + diff * frac)
    return F.when(n > 0, lerp)


def job_inputs(contents: Any, datasets: Any) -> Any:
    """Return per (jeditaskid, pandaid) the ``INPUT_COLUMNS`` of its files.

    As :func:`panda_predictor.db.job_inputs.inputs_per_job` in SQL: the finished
    ``input``/``pseudo_input`` files of datasets without MASTERID, each file's
    effective size in MB (1 MB without a size; an event range its share, truncated
    to whole bytes) and effective events, summed per job.
    """
    from pyspark.sql import functions as F

    def num(column: str) -> Any:
        return F.col(column).cast("double")

    files = contents.where(
        (F.col("status") == FINISHED_FILE)
        & F.col("type").isin(*INPUT_FILE_TYPES)
        & F.col("pandaid").isNotNull()
    )
    masters = datasets.where(F.col("masterid").isNull()).select(
        "jeditaskid", "datasetid"
    )
    files = files.join(masters, ["jeditaskid", "datasetid"], "inner")
    one_mb = F.lit(BYTES_PER_INPUT_MB)
    has_range = F.col("startevent").isNotNull() & F.col("endevent").isNotNull()
    ranged = (num("nevents") > 0) & has_range
    ratio = num("fsize") * (num("endevent") - num("startevent") + 1) / num("nevents")
    share = F.when(ratio >= 0, F.floor(ratio)).otherwise(F.ceil(ratio)).cast("double")
    size = (
        F.when(F.col("fsize").isNull() | (num("fsize") == 0), one_mb)
        .when(ranged & (share == 0), one_mb)
        .when(ranged, share)
        .otherwise(num("fsize"))
    )
    length = num("endevent") - num("startevent") + 1
    events = (
        F.when(has_range, F.when(length > 0, length).otherwise(F.lit(1.0)))
        .when(F.col("nevents").isNotNull(), num("nevents"))
        .otherwise(F.lit(1.0))
    )
    input_mb, nevents, pseudo_input = INPUT_COLUMNS
    return files.groupBy("jeditaskid", "pandaid").agg(
        F.sum(size / one_mb).alias(input_mb),
        F.sum(events).alias(nevents),
        F.max(F.when(F.col("type") == PSEUDO_INPUT_TYPE, 1).otherwise(0)).alias(
            pseudo_input
        ),
    )


def _finished_scouts(
    jobs: Any, tasks: Any, params: LabelParams, inputs: Any | None
) -> Any:
    """Return the finished scout jobs joined with their task's and inputs' columns."""
    from pyspark.sql import functions as F

    handling = F.concat(
        F.lit(","),
        F.regexp_replace(F.coalesce(F.col("specialhandling"), F.lit("")), " ", ""),
        F.lit(","),
    )
    task_part = tasks.select(
        F.col("jeditaskid"),
        F.col("baseramcount").cast("double").alias("baseramcount"),
        F.col("cpuefficiency").cast("double").alias("cpuefficiency"),
        F.col("basewalltime").cast("double").alias("basewalltime"),
        F.col("ramunit").cast("string").alias("ramunit"),
    ).dropDuplicates(["jeditaskid"])
    scouts = jobs.where(
        (F.instr(handling, f",{params.scout_flag},") > 0)
        & (F.col("jobstatus") == params.finished_status)
    ).join(task_part, "jeditaskid", "inner")
    if inputs is None:
        return scouts.select(
            "*", *(F.lit(None).cast("double").alias(c) for c in INPUT_COLUMNS)
        )
    return scouts.join(inputs, ["jeditaskid", "pandaid"], "left")


def scout_jobs(
    jobs: Any,
    tasks: Any,
    params: LabelParams = DEFAULT_LABEL_PARAMS,
    inputs: Any | None = None,
) -> Any:
    """Return the finished scout jobs with their per-job measurements.

    Columns: ``jeditaskid``, ``endtime`` and the per-job ``ram_kb``, ``io``,
    ``cpu`` (HS06 s per event, NULL where the job does not count for cputime),
    ``cpu_s`` and ``in_bytes``, as :func:`~panda_predictor.core.labels.labels_frame`
    computes them. ``inputs`` (:func:`job_inputs`) replace a job's own NEVENTS and
    INPUTFILEBYTES where it has files.
    """
    from pyspark.sql import functions as F

    def num(column: str) -> Any:
        return F.col(column).cast("double")

    scouts = _finished_scouts(jobs, tasks, params, inputs)
    # JobUtils.getCoreCount: ACTUALCORECOUNT, then the job's CORECOUNT, then 1.
    cores = (
        F.when(num("actualcorecount") > 0, num("actualcorecount"))
        .when(num("corecount") > 0, num("corecount"))
        .otherwise(F.lit(1.0))
    )
    base_ram_kb = F.coalesce(F.col("baseramcount"), F.lit(0.0)) * 1024.0
    efficiency = F.coalesce(
        F.col("cpuefficiency"), F.lit(params.default_cpu_efficiency)
    )
    base_wall = F.coalesce(F.col("basewalltime"), F.lit(params.default_base_walltime))
    start = F.unix_micros(F.col("starttime").cast("timestamp"))
    end = F.unix_micros(F.col("endtime").cast("timestamp"))
    exec_s = (end - start).cast("double") / 1e6
    ran = F.coalesce(exec_s > 0, F.lit(False))
    # The master input's files (JEDI_DATASET_CONTENTS) where known, else the job's.
    in_bytes = F.coalesce(
        num("master_input_mb") * BYTES_PER_INPUT_MB, num("inputfilebytes")
    )
    total_bytes = F.coalesce(in_bytes, F.lit(0.0)) + F.coalesce(
        num("outputfilebytes"), F.lit(0.0)
    )
    events = F.coalesce(num("master_nevents"), num("nevents"))
    power = F.when(num("hs06sec") > 0, num("hs06sec") / (exec_s * cores)).otherwise(
        F.lit(params.default_core_power)
    )
    usable = (
        ran
        & (events > 0)
        & (
            (F.coalesce(num("pseudo_input"), F.lit(0.0)) > 0)
            | (events >= params.cpu_min_events_per_core * cores)
            | (exec_s > params.cpu_long_job_s)
        )
    )
    busy = F.greatest(exec_s - base_wall, F.lit(0.0))
    unit = F.coalesce(F.col("ramunit"), F.lit(""))
    ram_kb = F.when(
        (num("maxpss") > 0) & (unit == RAM_PER_CORE_UNIT),
        F.ceil((num("maxpss") - base_ram_kb) / cores).cast("double"),
    ).when((num("maxpss") > 0) & (unit != RAM_FIXED_UNIT), num("maxpss"))
    return scouts.select(
        F.col("jeditaskid"),
        F.col("endtime").cast("timestamp").alias("endtime"),
        ram_kb.alias("ram_kb"),
        F.when(ran, total_bytes / 1024.0 / exec_s / cores).alias("io"),
        F.when(
            F.coalesce(usable, F.lit(False)),
            busy * power * cores * efficiency / 100.0 / events,
        ).alias("cpu"),
        num("cpuconsumptiontime").alias("cpu_s"),
        in_bytes.alias("in_bytes"),
    )


def task_aggregates(
    jobs: Any,
    tasks: Any,
    params: LabelParams = DEFAULT_LABEL_PARAMS,
    inputs: Any | None = None,
) -> Any:
    """Return one row per task of ``tasks``: what ``finalize_labels`` reads."""
    from pyspark.sql import functions as F

    per_job = scout_jobs(jobs, tasks, params, inputs)
    per_task = per_job.groupBy("jeditaskid").agg(
        F.sort_array(F.collect_list("ram_kb")).alias("ram_values"),
        F.sort_array(F.collect_list("cpu")).alias("cpu_values"),
        F.max("io").alias("io_kb_per_s"),
        F.max("cpu_s").alias("max_cpu_s"),
        F.max("in_bytes").alias("max_input_bytes"),
        F.count(F.lit(1)).alias("n_scouts"),
        F.max("endtime").alias("labels_known_at"),
    )
    ids = tasks.select(
        "jeditaskid",
        F.col("ramunit").cast("string").alias("ramunit"),
        F.col("cputimeunit").cast("string").alias("cputimeunit"),
    ).dropDuplicates(["jeditaskid"])
    return ids.join(per_task, "jeditaskid", "left").select(
        "jeditaskid",
        _quantile(F.col("ram_values"), params.ram_quantile).alias("ram_kb"),
        _quantile(F.col("cpu_values"), params.cpu_quantile).alias("cpu_per_event"),
        "io_kb_per_s",
        "max_cpu_s",
        "max_input_bytes",
        F.coalesce(F.col("n_scouts"), F.lit(0)).alias("n_scouts"),
        "labels_known_at",
        "ramunit",
        "cputimeunit",
    )


def _read(spark: Any, root: str, folder: str, columns: tuple[str, ...]) -> Any:
    path = f"{root.rstrip('/')}/{folder}"
    if "://" not in root and not Path(path).exists():
        raise UserInputError(
            f"The Spark label input must hold a '{folder}' folder of Parquet files "
            f"(the layout of 'panda-predictor export'). Got no {path} instead."
        )
    frame = spark.read.parquet(path)
    missing = [c for c in columns if c not in frame.columns]
    if missing:
        raise UserInputError(
            f"The Parquet files in {path} must have the columns {list(columns)}. "
            f"Got {sorted(frame.columns)} instead; missing {missing}."
        )
    return frame.select(*columns)


def _exists(spark: Any, path: str) -> bool:
    """Return whether ``path`` (a local folder or a Hadoop URL) exists."""
    if "://" not in path:
        return Path(path).exists()
    jvm = spark.sparkContext._jvm
    hadoop_path = jvm.org.apache.hadoop.fs.Path(path)
    conf = spark.sparkContext._jsc.hadoopConfiguration()
    return bool(hadoop_path.getFileSystem(conf).exists(hadoop_path))


def spark_labels(
    spark: Any,
    input_dir: str | Path,
    params: LabelParams = DEFAULT_LABEL_PARAMS,
    progress: bool = False,
) -> pd.DataFrame:
    """Return the labels of every task under ``input_dir``, one row per task.

    Parameters
    ----------
    spark:
        A session from :func:`~pipelines.labels.spark.session.spark_session`.
    input_dir:
        Folder or URL (``hdfs://``, ``s3a://``) holding ``jedi_tasks/`` and
        ``jobsarchived4/`` Parquet datasets (any partitioning: month, day, none),
        and PanDA's job archive ``jobsarchived/`` where there is one.
    params:
        Constants of the scout formulas.
    progress:
        Show a progress bar (job rows per second) on stderr.
    """
    started = time.perf_counter()
    root = str(input_dir)
    tasks = _read(spark, root, TASKS_FOLDER, TASK_COLUMNS)
    jobs = _read(spark, root, JOBS_FOLDER, ("pandaid", *JOB_COLUMNS))
    job_rows = jobs.count()  # Parquet footers only: no scan
    if _exists(spark, f"{root.rstrip('/')}/{ARCHIVE_FOLDER}"):
        # jobsArchived4 UNION jobsArchived, as getScoutJobData_JEDI reads them.
        archive = _read(spark, root, ARCHIVE_FOLDER, ("pandaid", *JOB_COLUMNS))
        job_rows += archive.count()
        jobs = jobs.unionByName(archive).distinct()
    inputs = None
    if _exists(spark, f"{root.rstrip('/')}/{CONTENTS_FOLDER}"):
        contents = _read(spark, root, CONTENTS_FOLDER, CONTENTS_COLUMNS)
        datasets = _read(
            spark, root, DATASETS_FOLDER, ("jeditaskid", "datasetid", "masterid")
        )
        inputs = job_inputs(contents, datasets)
    with spark_progress(spark, job_rows, enabled=progress):
        aggregates = task_aggregates(jobs, tasks, params, inputs).toPandas()
    labels = labels_from_aggregates(aggregates, params)
    seconds = time.perf_counter() - started
    log.info(
        "Spark labels: %d tasks from %d job rows in %.1f s (%.0f rows/s)",
        len(labels),
        job_rows,
        seconds,
        job_rows / seconds if seconds else 0.0,
    )
    return labels
