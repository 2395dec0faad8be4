"""Benchmark the Spark label engine: job rows per second, peak memory, linear growth.

Generates a simulated history once, straight to Parquet in the exporter's layout
(one partition per simulation batch, no database), then labels growing shares of it
(``--fractions``) with the production code (``pipelines.labels.spark.spark_labels``),
each share in a fresh process so the JVM starts cold every time. Peak memory is the
whole process tree (Python driver + JVM), sampled every 0.2 s. Figures go to stdout
and to docs/performance.md.

    python benchmarks/bench_spark_labels.py --tasks 2000000 --fractions 0.1 0.5 1
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")


def generate(root: Path, n_tasks: int, seed: int) -> int:
    """Write a simulated history of ``n_tasks`` under ``root``; return the batches."""
    from tqdm import tqdm

    from pipelines.simulation import SimulationConfig, simulate_history

    config = SimulationConfig(n_tasks=n_tasks, n_defined=0, seed=seed)
    n = 0
    with tqdm(desc="generate", unit="task", total=n_tasks) as bar:
        for batch in simulate_history(config, progress=False):
            for name, frame in (
                ("jedi_tasks", batch.jedi_tasks),
                ("jobsarchived4", batch.jobsarchived4),
            ):
                part = root / "all" / name / f"batch={n:05d}"
                part.mkdir(parents=True, exist_ok=True)
                frame.to_parquet(part / "part-0.parquet", index=False)
            n += 1
            bar.update(len(batch.jedi_tasks))
    return n


def share(root: Path, n_batches: int, fraction: float) -> Path:
    """Return a folder that holds the first ``fraction`` of the batches (symlinks)."""
    keep = max(1, round(n_batches * fraction))
    folder = root / f"share-{keep:05d}"
    for name in ("jedi_tasks", "jobsarchived4"):
        (folder / name).mkdir(parents=True, exist_ok=True)
        for i in range(keep):
            link = folder / name / f"batch={i:05d}"
            if not link.exists():
                link.symlink_to(root / "all" / name / f"batch={i:05d}")
    return folder


def _peak_rss_mb(stop: threading.Event, peak: list[float]) -> None:
    import psutil

    me = psutil.Process()
    while not stop.is_set():
        try:
            procs = [me, *me.children(recursive=True)]
            rss = sum(p.memory_info().rss for p in procs if p.is_running())
            peak[0] = max(peak[0], rss / 2**20)
        except psutil.Error:
            pass
        stop.wait(0.2)


def one_run(folder: Path, master: str, driver_memory: str) -> dict:
    """Label ``folder`` once in this process; return the figures."""
    from pipelines.labels.spark import spark_labels, spark_session

    peak, stop = [0.0], threading.Event()
    watcher = threading.Thread(target=_peak_rss_mb, args=(stop, peak), daemon=True)
    watcher.start()
    started = time.perf_counter()
    spark = spark_session(master, {"spark.driver.memory": driver_memory})
    ready = time.perf_counter()
    rows = spark.read.parquet(str(folder / "jobsarchived4")).count()
    labels = spark_labels(spark, folder)
    done = time.perf_counter()
    spark.stop()
    stop.set()
    watcher.join()
    return {
        "tasks": len(labels),
        "labelled": int((labels["n_scouts"] > 0).sum()),
        "job_rows": rows,
        "startup_s": ready - started,
        "labels_s": done - ready,
        "peak_rss_mb": peak[0],
    }


def run_share(folder: Path, args: argparse.Namespace) -> dict:
    """Label one share of the history in a fresh process; print and return its
    figures."""
    out = (
        subprocess.run(
            [
                sys.executable,
                __file__,
                "--one",
                str(folder),
                args.master,
                args.driver_memory,
            ],
            check=True,
            capture_output=True,
            text=True,
        )
        .stdout.strip()
        .splitlines()[-1]
    )
    figures = json.loads(out)
    figures["rows_per_s"] = figures["job_rows"] / figures["labels_s"]
    print(
        f"{figures['tasks']:>10,} tasks {figures['job_rows']:>12,} job rows: "
        f"{figures['labels_s']:7.1f} s ({figures['rows_per_s']:,.0f} rows/s), "
        f"JVM start {figures['startup_s']:.1f} s, peak RSS "
        f"{figures['peak_rss_mb']:,.0f} MB",
        flush=True,
    )
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--one", nargs=3, help=argparse.SUPPRESS)
    parser.add_argument(
        "--tasks",
        type=int,
        default=200_000,
        help="simulated tasks in the history, generated once per --workdir "
        "(default: %(default)s)",
    )
    parser.add_argument(
        "--fractions",
        nargs="+",
        type=float,
        default=[0.1, 0.5, 1],
        help="shares of the history's batches to label, each in a fresh process "
        "(default: %(default)s)",
    )
    parser.add_argument(
        "--master", default="local[2]", help="Spark master URL (default: %(default)s)"
    )
    parser.add_argument(
        "--driver-memory",
        default="4g",
        help="Spark driver memory (spark.driver.memory) (default: %(default)s)",
    )
    parser.add_argument(
        "--seed",
        type=int,
        default=0,
        help="seed of the simulated history (default: %(default)s)",
    )
    parser.add_argument(
        "--workdir",
        type=Path,
        default=Path("/tmp/bench-spark"),
        metavar="DIR",
        help="folder the Parquet history is written to and reused from "
        "(default: %(default)s)",
    )
    parser.add_argument("--no-write", action="store_true", help="Do not touch docs/.")
    args = parser.parse_args()
    if args.one:
        folder, master, memory = args.one
        print(json.dumps(one_run(Path(folder), master, memory)))
        return

    data = args.workdir / f"tasks-{args.tasks}-seed-{args.seed}"
    marker = data / "batches"
    if not marker.exists():
        marker.parent.mkdir(parents=True, exist_ok=True)
        marker.write_text(str(generate(data, args.tasks, args.seed)))
    n_batches = int(marker.read_text())
    load = os.getloadavg()[0]
    rows = [
        run_share(share(data, n_batches, fraction), args) for fraction in args.fractions
    ]
    base = rows[0]["labels_s"] / rows[0]["job_rows"]
    table = "\n".join(
        f"| {r['tasks']:,} | {r['job_rows']:,} | {r['labels_s']:.1f} | "
        f"{r['rows_per_s']:,.0f} | {r['labels_s'] / r['job_rows'] / base:.2f} | "
        f"{r['peak_rss_mb']:,.0f} |"
        for r in rows
    )
    body = f"""## Spark labels (benchmarks/bench_spark_labels.py)

Measured {time.strftime("%Y-%m-%d")} on {platform.machine()}, {os.cpu_count()} cores
(1-minute load average {load:.1f} at the start), Python {platform.python_version()},
Spark `{args.master}`, driver memory {args.driver_memory}. Command:
`python benchmarks/bench_spark_labels.py --tasks {args.tasks} --fractions
{" ".join(map(str, args.fractions))}`. Simulated history written once to Parquet
(one partition per simulation batch); each share labelled in a fresh process.
'seconds' is the labelling (read, per-job formulas, exact per-task quantiles, the
aggregates back to the driver, margins and units), after the JVM started; 'cost per
row' is seconds per job row relative to the smallest share (1.00 = linear). Peak RSS
is the Python driver plus the JVM.

| tasks | job rows | seconds | job rows/s | cost per row | peak RSS MB |
|---:|---:|---:|---:|---:|---:|
{table}
"""
    print(body)
    if not args.no_write:
        sys.path.insert(0, str(ROOT / "benchmarks"))
        from perfdoc import write_section

        write_section("bench_spark_labels", body)


if __name__ == "__main__":
    main()
