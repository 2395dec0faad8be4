"""Benchmark the Nextflow trace reader: seconds to read a 100,000-task trace.

Writes a SYNTHETIC trace (``benchmarks/synthetic_nextflow.py``) of ``--tasks``
attempts in three forms (human-readable tab-separated, raw tab-separated, raw
comma-separated), then times ``read_job_log`` on each (detection, parsing, the
mapping onto the job frame) and ``jobs_to_tasks`` on the result, best of
``--repeat`` runs. The goal is <= 10 s per 100,000 tasks. Figures go to stdout and
to docs/performance.md.

    python benchmarks/bench_nextflow.py --tasks 100000
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

GOAL_S = 10.0
FORMS = {
    "human-readable, tab-separated": (False, "\t"),
    "raw (trace.raw = true), tab-separated": (True, "\t"),
    "raw, comma-separated export": (True, ","),
}


def time_form(path: Path, tasks: int, repeat: int) -> tuple[float, float, float, float]:
    """Read and map one trace ``repeat`` times; return its size in MB and the best
    read, mapping and CPU seconds."""
    from panda_predictor.ingest import read_job_log
    from panda_predictor.ingest.to_panda import jobs_to_tasks

    size_mb = path.stat().st_size / 1024**2
    read_s, map_s, cpu_s = [], [], []
    for _ in range(repeat):
        c0, t0 = time.process_time(), time.perf_counter()
        frame, report = read_job_log(path)
        t1 = time.perf_counter()
        jobs_to_tasks(frame)
        read_s.append(t1 - t0)
        map_s.append(time.perf_counter() - t1)
        cpu_s.append(time.process_time() - c0)
    assert report.n_jobs == tasks
    return size_mb, min(read_s), min(map_s), min(cpu_s)


def main() -> None:
    """Time the reader on each form and write the section of docs/performance.md."""
    from perfdoc import write_section
    from synthetic_nextflow import write_trace

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--tasks",
        type=int,
        default=100_000,
        help="task attempts in the synthetic trace (default: %(default)s)",
    )
    parser.add_argument(
        "--repeat",
        type=int,
        default=3,
        help="timed reads of each trace form; the best counts (default: %(default)s)",
    )
    parser.add_argument("--no-doc", action="store_true", help="print only")
    args = parser.parse_args()
    load = os.getloadavg()[0]
    started = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    rows = []
    with tempfile.TemporaryDirectory() as folder:
        for form, (raw, sep) in FORMS.items():
            path = write_trace(
                Path(folder) / f"trace-{len(rows)}.txt", args.tasks, 0, raw, sep
            )
            size_mb, read, mapped, cpu = time_form(path, args.tasks, args.repeat)
            rows.append((form, size_mb, read, mapped, cpu))
            print(
                f"{form}: {size_mb:.1f} MB, read {read:.2f} s, "
                f"to tasks {mapped:.2f} s, CPU {cpu:.2f} s"
            )
    worst = max(r[2] + r[3] for r in rows)
    worst_cpu = max(r[4] for r in rows)
    verdict = "met" if worst <= GOAL_S else "NOT met"
    table = [
        "| form | file MB | read_job_log s | jobs_to_tasks s | tasks/s | CPU s |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for form, size_mb, read, mapped, cpu in rows:
        rate = args.tasks / (read + mapped)
        table.append(
            f"| {form} | {size_mb:.1f} | {read:.2f} | {mapped:.2f} | {rate:,.0f} | "
            f"{cpu:.2f} |"
        )
    # More runnable work than cores: other processes took some of the time.
    shared = ": the machine was shared" if load >= (os.cpu_count() or 1) else ""
    body = "\n".join(
        [
            "## Nextflow trace reader (benchmarks/bench_nextflow.py)",
            "",
            f"Measured {started} on {platform.machine()}, {os.cpu_count()} cores "
            f"(1-minute load average {load:.1f} at the start{shared}), Python "
            f"{platform.python_version()}. Command:",
            "",
            "```",
            f"python benchmarks/bench_nextflow.py --tasks {args.tasks} "
            f"--repeat {args.repeat}",
            "```",
            "",
            f"A **synthetic** trace of {args.tasks:,} task attempts "
            "(`benchmarks/synthetic_nextflow.py`: made-up tasks of one pipeline, "
            "22 fields) in each form; best of "
            f"{args.repeat} runs. `read_job_log` is detection, parsing and the "
            "mapping onto the job frame; `jobs_to_tasks` the task schema; 'CPU s' "
            "the process time of both (wall-clock time on a shared machine also "
            "counts the waits for a core).",
            "",
            *table,
            "",
            f"**Goal (<= {GOAL_S:g} s for a 100,000-task trace, read and mapped): "
            f"{verdict}** (slowest form {worst:.2f} s of wall-clock time, "
            f"{worst_cpu:.2f} s of CPU time: the time the reader itself needs when "
            "it has a core to itself).",
        ]
    )
    print(body)
    if not args.no_doc:
        write_section("bench_nextflow", body)


if __name__ == "__main__":
    main()
