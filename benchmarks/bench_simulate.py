"""Benchmark the simulated PanDA history: tasks per second and peak memory.

Each case runs in a fresh subprocess so its peak resident memory (getrusage) is its
own. Cases: generation alone, and generation written to SQLite and to PostgreSQL.
Prints the figures and replaces the "Simulation" section of docs/performance.md.

    python benchmarks/bench_simulate.py   # 100k everywhere, also 1M generation
    python benchmarks/bench_simulate.py --sizes 100000 1000000 --targets sqlite
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import subprocess
import sys
import tempfile
import time
import uuid
from datetime import date
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PG_URL = os.environ.get(
    "PANDA_PREDICTOR_TEST_PG_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/test"
)


def _peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # kB on Linux


def run_case(target: str, n_tasks: int, batch_size: int) -> dict:
    """Run one case in this process; return its figures."""
    os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")
    sys.path.insert(0, str(ROOT))
    import sqlalchemy as sa

    from panda_predictor.db.engine import make_engine
    from panda_predictor.settings import load_settings
    from pipelines.simulation import SimulationConfig, simulate_history
    from pipelines.simulation.history_writer import ensure_panda_tables, load_history

    config = SimulationConfig(n_tasks=n_tasks, seed=1, batch_size=batch_size)
    baseline = _peak_mb()
    rows = {"jedi_tasks": 0, "jedi_datasets": 0, "jobsarchived4": 0}
    labels: dict[str, float] = {}
    with tempfile.TemporaryDirectory() as tmp:
        if target == "generate":
            start = time.perf_counter()
            for batch in simulate_history(config, progress=False):
                for name in rows:
                    rows[name] += len(getattr(batch, name))
            seconds = time.perf_counter() - start
        else:
            schema = f"pp_bench_{uuid.uuid4().hex[:8]}"
            if target == "sqlite":
                settings = load_settings(
                    home=tmp, db_url=f"sqlite:///{tmp}/bench.sqlite"
                )
            else:
                settings = load_settings(home=tmp, db_url=PG_URL, db_schema=schema)
            engine = make_engine(settings)
            try:
                ensure_panda_tables(engine, settings)
                start = time.perf_counter()
                rows = load_history(engine, settings, simulate_history(config, False))
                seconds = time.perf_counter() - start
                labels = _label_timings(engine, settings, target)
            finally:
                if target == "postgresql":
                    with engine.begin() as conn:
                        conn.execute(sa.text(f"DROP SCHEMA IF EXISTS {schema} CASCADE"))
                engine.dispose()
    return {
        "target": target,
        "tasks": n_tasks,
        "batch_size": batch_size,
        "seconds": round(seconds, 2),
        "tasks_per_s": round(n_tasks / seconds),
        "jobs": rows["jobsarchived4"],
        "datasets": rows["jedi_datasets"],
        "peak_rss_mb": round(_peak_mb()),
        "rss_above_imports_mb": round(_peak_mb() - baseline),
        **labels,
    }


def _label_timings(engine, settings, target: str) -> dict[str, float]:
    """Time label building from the database: Python formulas, and SQL on PostgreSQL."""
    from panda_predictor.db.engine import get_panda_tables
    from panda_predictor.db.labels_sql import labels_by_range
    from pipelines.labels.build import build_labels

    start = time.perf_counter()
    labelled = build_labels(engine, settings, chunk_size=20_000, progress=False)
    out = {
        "label_seconds": round(time.perf_counter() - start, 2),
        "labelled_tasks": int(labelled["n_scouts"].gt(0).sum()),
    }
    if target == "postgresql":
        tables = get_panda_tables(settings, engine)
        start = time.perf_counter()
        labels_by_range(engine, tables, chunk_size=20_000)
        out["sql_label_seconds"] = round(time.perf_counter() - start, 2)
    return out


def _subprocess(target: str, n_tasks: int, batch_size: int) -> dict:
    command = [sys.executable, __file__, "--one", target, str(n_tasks), str(batch_size)]
    out = subprocess.run(command, check=True, capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def _table(results: list[dict]) -> str:
    lines = [
        "| case | tasks | jobs | seconds | tasks/s | peak RSS (MB) "
        "| above imports (MB) | labels: s (tasks/s) | SQL labels: s |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in results:
        label = (
            f"{r['label_seconds']} ({round(r['tasks'] / r['label_seconds']):,})"
            if "label_seconds" in r
            else ""
        )
        lines.append(
            f"| {r['target']} | {r['tasks']:,} | {r['jobs']:,} | {r['seconds']} | "
            f"{r['tasks_per_s']:,} | {r['peak_rss_mb']:,} | "
            f"{r['rss_above_imports_mb']:,} | {label} | "
            f"{r.get('sql_label_seconds', '')} |"
        )
    return "\n".join(lines)


def section_text(results: list[dict]) -> str:
    """Return the markdown of this benchmark's section of docs/performance.md."""
    return "\n".join(
        [
            "## Simulation (benchmarks/bench_simulate.py)",
            "",
            f"Measured {date.today().isoformat()} on {platform.machine()}, "
            f"{os.cpu_count()} cores (shared with other work, so a noisy machine "
            f"slows the figures), Python {platform.python_version()}; one fresh "
            f"process per case; {results[0]['batch_size']:,} tasks per batch; "
            "'generate' builds the pandas frames only, 'sqlite'/'postgresql' "
            "include the writes (DBAPI executemany on SQLite, COPY on PostgreSQL, "
            "one transaction per batch). Peak RSS is the whole process (Python, "
            "pandas, SQLAlchemy); 'above imports' is what the simulation added. "
            "'labels' reads the history back (tasks, datasets, jobs, 20,000 tasks "
            "per chunk) and applies the scout formulas in Python; 'SQL labels' is "
            "the same computation as percentile_cont aggregations in PostgreSQL, "
            "20,000 tasks per query selected by JEDITASKID range "
            "(`labels --engine sql`).",
            "",
            _table(results),
        ]
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--one", nargs=3, help=argparse.SUPPRESS)
    parser.add_argument(
        "--sizes",
        nargs="+",
        type=int,
        default=[100_000],
        help="history sizes, in tasks, written to each --targets database, one case "
        "each (default: %(default)s)",
    )
    parser.add_argument(
        "--generate-sizes",
        nargs="+",
        type=int,
        default=[100_000, 1_000_000],
        help="history sizes, in tasks, generated without a database, one case each "
        "(default: %(default)s)",
    )
    parser.add_argument(
        "--targets",
        nargs="+",
        default=["sqlite", "postgresql"],
        choices=["sqlite", "postgresql"],
        help="databases the --sizes histories are written to (default: both)",
    )
    parser.add_argument(
        "--batch-size",
        type=int,
        default=10_000,
        help="simulated tasks per batch (one transaction per batch when written) "
        "(default: %(default)s)",
    )
    parser.add_argument("--no-write", action="store_true", help="Do not touch docs/.")
    args = parser.parse_args()
    if args.one:
        target, n_tasks, batch_size = args.one
        print(json.dumps(run_case(target, int(n_tasks), int(batch_size))))
        return
    cases = [("generate", n) for n in args.generate_sizes]
    cases += [(t, n) for t in args.targets for n in args.sizes]
    results = []
    for target, n_tasks in cases:
        result = _subprocess(target, n_tasks, args.batch_size)
        print(json.dumps(result), flush=True)
        results.append(result)
    print(_table(results))
    if not args.no_write:
        from perfdoc import PERFORMANCE_MD, write_section

        write_section("bench_simulate", section_text(results))
        print(f"Updated {PERFORMANCE_MD}")


if __name__ == "__main__":
    main()
