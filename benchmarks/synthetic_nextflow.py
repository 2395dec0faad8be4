"""Write a SYNTHETIC Nextflow trace file: made-up tasks, not a measurement of anything.

The trace imitates one nf-core-like pipeline run again and again over weeks: eight
processes, each with its own cores, memory and time requests and its own use of
memory, CPU, time and I/O (log-normal around a per-sample size, so some samples are
large). A task whose memory (time) use exceeds its request fails with exit 137
(140) and is retried with twice the request, as nf-core's ``errorStrategy`` does.
It exists to exercise the reader and the benchmark end to end
(``docs/job-logs.md``, ``benchmarks/bench_nextflow.py``); its figures say nothing
about real workflows.

    python benchmarks/synthetic_nextflow.py synthetic_trace.txt --tasks 2000
    python benchmarks/synthetic_nextflow.py raw.txt --tasks 2000 --raw
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

#: Synthetic processes: (name, cpus, memory request GB, time request h,
#: median memory GB, median realtime s, CPU efficiency, median I/O MB).
PROCESSES: tuple[tuple[str, int, float, float, float, float, float, float], ...] = (
    ("NFCORE_DEMO:DEMO:FASTQC", 2, 4.0, 2.0, 0.6, 120.0, 0.9, 800.0),
    ("NFCORE_DEMO:DEMO:TRIMGALORE", 4, 8.0, 4.0, 1.2, 400.0, 0.8, 3000.0),
    ("NFCORE_DEMO:DEMO:ALIGN:STAR", 8, 36.0, 8.0, 26.0, 2400.0, 0.95, 9000.0),
    ("NFCORE_DEMO:DEMO:ALIGN:SAMTOOLS_SORT", 4, 8.0, 4.0, 3.0, 600.0, 0.7, 12000.0),
    ("NFCORE_DEMO:DEMO:QUANT:SALMON", 6, 16.0, 4.0, 5.0, 900.0, 0.85, 4000.0),
    ("NFCORE_DEMO:DEMO:MARKDUP", 2, 12.0, 0.5, 7.0, 1100.0, 0.5, 15000.0),
    ("NFCORE_DEMO:DEMO:QUALIMAP", 2, 16.0, 4.0, 9.0, 700.0, 0.6, 5000.0),
    ("NFCORE_DEMO:DEMO:MULTIQC", 1, 4.0, 1.0, 0.4, 60.0, 0.4, 200.0),
)
FIELDS = [
    "task_id",
    "hash",
    "native_id",
    "process",
    "tag",
    "name",
    "status",
    "exit",
    "cpus",
    "memory",
    "time",
    "attempt",
    "submit",
    "start",
    "complete",
    "duration",
    "realtime",
    "%cpu",
    "peak_rss",
    "peak_vmem",
    "rchar",
    "wchar",
]
GB = 1024**3
START = np.datetime64("2024-01-08T08:00:00", "ms")


def _size(n_bytes: float) -> str:
    """Return a size as Nextflow prints it (``1.5 GB``)."""
    for unit, power in (("GB", 3), ("MB", 2), ("KB", 1)):
        if n_bytes >= 1024**power:
            return f"{n_bytes / 1024**power:.1f} {unit}"
    return f"{n_bytes:.0f} B"


def _duration(seconds: float) -> str:
    """Return a duration as Nextflow prints it (``1h 2m 3s``, ``4.5s``, ``80ms``)."""
    if seconds < 1:
        return f"{seconds * 1000:.0f}ms"
    if seconds < 60:
        return f"{seconds:.1f}s"
    whole = int(round(seconds))
    parts = []
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60), ("s", 1)):
        if whole >= size:
            parts.append(f"{whole // size}{unit}")
            whole %= size
    return " ".join(parts)


def _when(ms: np.datetime64) -> str:
    text = str(ms.astype("datetime64[ms]")).replace("T", " ")
    return text if "." in text else text + ".000"


def trace_rows(n_tasks: int, seed: int = 0) -> list[dict[str, float | str]]:
    """Return ``n_tasks`` synthetic task attempts (values in bytes, ms, %)."""
    rng = np.random.default_rng(seed)
    rows: list[dict[str, float | str]] = []
    run_start = START
    sample = 0
    while len(rows) < n_tasks:
        clock = run_start
        for _ in range(int(rng.integers(3, 9))):
            sample += 1
            size = float(rng.lognormal(0.0, 0.45))
            for proc in PROCESSES:
                if len(rows) >= n_tasks:
                    break
                clock = _attempts(rows, rng, proc, f"S{sample:05d}", size, clock)
        run_start = run_start + np.timedelta64(int(rng.uniform(0.3, 1.5) * 86400e3))
    return rows


def _attempts(rows, rng, proc, tag, size, clock) -> np.datetime64:
    """Append one task's attempts (retried on a memory or time kill); return clock."""
    name, cpus, mem_gb, time_h, med_mem, med_s, eff, med_io = proc
    memory = med_mem * GB * size * rng.lognormal(0.0, 0.15)
    realtime = med_s * size * rng.lognormal(0.0, 0.3)
    io = med_io * 1024**2 * size * rng.lognormal(0.0, 0.3)
    for attempt in (1, 2, 3):
        request, limit = mem_gb * GB * attempt, time_h * 3600.0 * attempt
        submit = clock + np.timedelta64(int(rng.uniform(1, 30) * 1e3))
        wait = rng.exponential(20.0) + 1.0
        start = submit + np.timedelta64(int(wait * 1e3))
        killed = 137 if memory > request else 140 if realtime > limit else 0
        last = killed == 0 or attempt == 3
        ran = realtime if killed == 0 else min(realtime, limit) * rng.uniform(0.3, 1)
        complete = start + np.timedelta64(int(ran * 1e3))
        rows.append(
            {
                "task_id": len(rows) + 1,
                "hash": f"{rng.integers(0, 256):02x}/{rng.integers(0, 16**6):06x}",
                "native_id": int(rng.integers(10_000, 99_999)),
                "process": name,
                "tag": tag,
                "name": f"{name} ({tag})",
                "status": "COMPLETED" if killed == 0 else "FAILED",
                "exit": killed,
                "cpus": cpus,
                "memory": request,
                "time": limit * 1e3,
                "attempt": attempt,
                "submit": submit,
                "start": start,
                "complete": complete,
                "duration": (ran + wait) * 1e3,
                "realtime": ran * 1e3,
                "%cpu": 100.0 * cpus * eff * rng.uniform(0.8, 1.0),
                "peak_rss": min(memory, request) if killed == 137 else memory,
                "peak_vmem": memory * 1.3,
                "rchar": io * 0.8 * ran / realtime,
                "wchar": io * 0.2 * ran / realtime,
            }
        )
        clock = complete
        if last:
            return clock
    return clock


def _format(row: dict[str, float | str], raw: bool) -> list[str]:
    out = []
    for name in FIELDS:
        value = row[name]
        if isinstance(value, np.datetime64):
            out.append(str(value.astype(np.int64)) if raw else _when(value))
        elif name in ("memory", "peak_rss", "peak_vmem", "rchar", "wchar"):
            out.append(f"{value:.0f}" if raw else _size(float(value)))
        elif name in ("time", "duration", "realtime"):
            out.append(f"{value:.0f}" if raw else _duration(float(value) / 1e3))
        elif name == "%cpu":
            out.append(f"{value:.1f}" if raw else f"{value:.1f}%")
        else:
            out.append(str(value))
    return out


def write_trace(
    path: str | Path, n_tasks: int, seed: int = 0, raw: bool = False, sep: str = "\t"
) -> Path:
    """Write a synthetic trace of ``n_tasks`` attempts; return its path.

    :param raw: write raw numbers (``trace.raw = true``) instead of human values.
    :param sep: the separator (``","`` for the comma-separated export form).
    """
    path = Path(path)
    lines = [sep.join(FIELDS)]
    lines += [sep.join(_format(row, raw)) for row in trace_rows(n_tasks, seed)]
    path.write_text("\n".join(lines) + "\n")
    return path


def main() -> None:
    """Write a synthetic trace from the command line."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("path", type=Path, metavar="FILE", help="trace file to write")
    parser.add_argument(
        "--tasks",
        type=int,
        default=2000,
        help="task attempts in the trace, retries included (default: %(default)s)",
    )
    parser.add_argument(
        "--seed",
        type=int,
        default=0,
        help="seed of the random trace (default: %(default)s)",
    )
    parser.add_argument(
        "--raw",
        action="store_true",
        help="write raw numbers (trace.raw = true) instead of human-readable values",
    )
    parser.add_argument("--csv", action="store_true", help="comma-separated")
    args = parser.parse_args()
    write_trace(args.path, args.tasks, args.seed, args.raw, "," if args.csv else "\t")
    print(f"synthetic trace written: {args.path} ({args.tasks} task attempts)")


if __name__ == "__main__":
    main()
