"""SQLAlchemy Core descriptions of the tables panda-predictor reads and writes.

Names are lower-case on purpose: SQLAlchemy then emits them unquoted, which the
database folds to its own case (upper-case on Oracle, lower-case on PostgreSQL), so
one description serves every dialect. The DDL that creates these tables lives in
``sql/``; these objects only describe them for queries.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

from sqlalchemy import (
    BigInteger,
    Column,
    DateTime,
    Float,
    Integer,
    MetaData,
    Numeric,
    SmallInteger,
    String,
    Table,
    Text,
)

from panda_predictor.core.domain.targets import TARGET_NAMES


@dataclass(frozen=True)
class PandaTables:
    """PanDA's own tables (the subset the plugin uses)."""

    jedi_tasks: Table
    jedi_datasets: Table
    jobsarchived4: Table
    #: PanDA's job archive (ATLAS_PANDAARCH.JOBSARCHIVED); it may not exist.
    jobsarchived: Table
    #: The files of the datasets, with the job that used each and their status
    #: (the labels read the jobs' files; the write-back counts them to lift a
    #: written task's scout cap as JEDI does).
    jedi_dataset_contents: Table


@dataclass(frozen=True)
class PluginTables:
    """The plugin's own tables: prediction audit, outcomes and schema version."""

    audit: Table
    schema_version: Table


#: ``archive_schema`` of :func:`panda_tables` meaning "the schema of the others".
SAME_SCHEMA = "<same>"


@lru_cache(maxsize=8)
def panda_tables(
    schema: str | None, archive_schema: str | None = SAME_SCHEMA
) -> PandaTables:
    """Describe PanDA's JEDI_TASKS, JEDI_DATASETS, JOBSARCHIVED4 and the files of
    the datasets (JEDI_DATASET_CONTENTS) in ``schema``.

    The job archive JOBSARCHIVED (the same columns as JOBSARCHIVED4) is
    described in ``archive_schema``.
    """
    md = MetaData(schema=schema)
    jedi_tasks, jedi_datasets = _jedi_tasks(md), _jedi_datasets(md)
    jobsarchived4 = _jobsarchived4(md)
    archive = MetaData(
        schema=schema if archive_schema == SAME_SCHEMA else archive_schema
    )
    jobsarchived = Table(
        "jobsarchived",
        archive,
        *(column._copy() for column in jobsarchived4.columns),  # MODIFICATIONTIME too
    )
    return PandaTables(
        jedi_tasks,
        jedi_datasets,
        jobsarchived4,
        jobsarchived,
        _jedi_dataset_contents(md),
    )


def _jedi_tasks(md: MetaData) -> Table:
    """Describe JEDI_TASKS: a task's definition, state and JEDI's lock."""
    return Table(
        "jedi_tasks",
        md,
        Column("jeditaskid", BigInteger, primary_key=True, autoincrement=False),
        Column("taskname", String(256)),
        Column("status", String(64)),
        Column("username", String(128)),
        Column("creationdate", DateTime),
        Column("modificationtime", DateTime),
        Column("prodsourcelabel", String(20)),
        Column("workinggroup", String(32)),
        Column("vo", String(32)),
        Column("corecount", Integer),
        Column("tasktype", String(64)),
        Column("processingtype", String(64)),
        Column("architecture", String(256)),
        Column("transuses", String(64)),
        Column("transhome", String(128)),
        Column("transpath", String(128)),
        Column("splitrule", String(200)),
        Column("walltime", Integer),
        Column("walltimeunit", String(32)),
        Column("ramcount", Integer),
        Column("ramunit", String(32)),
        Column("baseramcount", Integer),
        Column("iointensity", Integer),
        Column("iointensityunit", String(32)),
        Column("cputime", Integer),
        Column("cputimeunit", String(32)),
        Column("cpuefficiency", SmallInteger),
        Column("basewalltime", Integer),
        Column("outdiskcount", Integer),
        Column("workdiskcount", Integer),
        Column("campaign", String(32)),
        Column("gshare", String(32)),
        Column("resource_type", String(56)),
        Column("framework", String(50)),
        Column("diskio", Integer),
        Column("memory_leak_core", BigInteger),
        # JEDI's own lock: the agent working on the task; the hook leaves such a
        # task alone until JEDI lets go of it.
        Column("lockedby", String(40)),
        Column("lockedtime", DateTime),
    )


def _jedi_datasets(md: MetaData) -> Table:
    """Describe JEDI_DATASETS: a task's datasets and the scout cap of its master."""
    return Table(
        "jedi_datasets",
        md,
        Column("jeditaskid", BigInteger, primary_key=True, autoincrement=False),
        Column("datasetid", BigInteger, primary_key=True, autoincrement=False),
        Column("datasetname", String(255)),
        Column("type", String(20)),
        Column("masterid", BigInteger),
        Column("status", String(20)),
        Column("nfiles", BigInteger),
        Column("nevents", BigInteger),
        # JEDI caps the master's nFilesToBeUsed at the scout chunks (writer lifts it).
        Column("nfilestobeused", BigInteger),
        Column("nfilesused", BigInteger),
        # NOT NULL in PanDA's DDL: the simulator fills them.
        Column("creationtime", DateTime),
        Column("modificationtime", DateTime),
    )


def _jobsarchived4(md: MetaData) -> Table:
    """Describe JOBSARCHIVED4: the finished jobs, with what each measured."""
    return Table(
        "jobsarchived4",
        md,
        Column("pandaid", BigInteger, primary_key=True, autoincrement=False),
        Column("jeditaskid", BigInteger),
        Column("jobstatus", String(15)),
        Column("prodsourcelabel", String(20)),
        Column("processingtype", String(64)),
        Column("transformation", String(250)),
        Column("computingsite", String(128)),
        Column("specialhandling", String(80)),
        Column("corecount", SmallInteger),
        Column("actualcorecount", Integer),
        Column("nevents", BigInteger),
        Column("starttime", DateTime),
        Column("endtime", DateTime),
        Column("modificationtime", DateTime),  # NOT NULL in PanDA's DDL
        Column("cpuconsumptiontime", Numeric(20)),
        Column("maxpss", BigInteger),
        Column("maxrss", BigInteger),
        Column("maxvmem", BigInteger),
        Column("inputfilebytes", BigInteger),
        Column("outputfilebytes", BigInteger),
        Column("hs06sec", BigInteger),
        Column("totrbytes", BigInteger),
        Column("totwbytes", BigInteger),
        Column("minramcount", BigInteger),
        Column("maxwalltime", BigInteger),
        Column("jobmetrics", String(500)),
        # The job's attempt at its file and the file's maxAttempt: a failed job at
        # its maxAttempt is lost for good (the early re-measurement counts it).
        Column("attemptnr", SmallInteger),
        Column("maxattempt", SmallInteger),
    )


def _jedi_dataset_contents(md: MetaData) -> Table:
    """Describe JEDI_DATASET_CONTENTS: the files of the datasets and their jobs."""
    return Table(
        "jedi_dataset_contents",
        md,
        Column("jeditaskid", BigInteger, primary_key=True, autoincrement=False),
        Column("datasetid", BigInteger, primary_key=True, autoincrement=False),
        Column("fileid", BigInteger, primary_key=True, autoincrement=False),
        Column("type", String(20)),
        Column("status", String(64)),
        Column("fsize", BigInteger),
        Column("nevents", BigInteger),
        Column("startevent", BigInteger),
        Column("endevent", BigInteger),
        Column("pandaid", BigInteger),
    )


def _per_target_columns() -> list[Column]:
    columns: list[Column] = []
    for name in TARGET_NAMES:
        columns += [
            Column(f"{name}_class", SmallInteger),
            Column(f"{name}_value", Integer),
            Column(f"{name}_unit", String(32)),
            Column(f"{name}_confidence", Float),
            Column(f"{name}_proba", String(400)),
        ]
    return columns


@lru_cache(maxsize=8)
def plugin_tables(schema: str | None) -> PluginTables:
    """Describe the plugin's own tables in ``schema``."""
    md = MetaData(schema=schema)
    audit = Table(
        "pp_prediction_audit",
        md,
        Column("jeditaskid", BigInteger, primary_key=True, autoincrement=False),
        Column("model_name", String(128), nullable=False),
        Column("model_version", String(64), nullable=False),
        Column("decision", String(16), nullable=False),
        Column("reason", String(400)),
        *_per_target_columns(),
        Column("predicted_at", DateTime, nullable=False),
        Column("written_at", DateTime),
        Column("host", String(128)),
    )
    schema_version = Table(
        "pp_schema_version",
        md,
        Column("component", String(32), primary_key=True),
        Column("version", Integer, nullable=False),
        Column("applied_at", DateTime, nullable=False),
        Column("description", Text),
    )
    return PluginTables(audit, schema_version)
