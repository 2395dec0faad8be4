"""Benchmark altered copies of a job log: the shapes of logs we do not have.

The benchmark is also run on real logs nobody here has, and a design choice is
judged by its worst log. Some ways those logs differ from the ten in
``../shared/data/traces`` can be made from the ten themselves, field by field of
the SWF format, and benchmarked with the same command:

- ``no-requests``: no requested time or memory (as METACENTRUM, OSC and
  SDSC-Par among the ten): scouts ask for the top class, the cost choice has no
  request to cap its values;
- ``half-requests``: the requests of a random half of the jobs removed (LLNL and
  LANL record them for only some jobs);
- ``no-keys``: user, group and executable unrecorded (an anonymised log): every
  job has one key, so a "task" is a burst of everybody's jobs;
- ``three-users``: users folded into three accounts (shared accounts);
- ``shuffled``: the job lines in a random order (a log not sorted by submission);
- ``first-jobs``: only the first 3,000 jobs (a short log).

Each altered log is written into ``--out`` and benchmarked as ``panda-predictor
benchmark --log FILE`` benchmarks it (the same function and defaults; its
report.md and full.json in a folder named after the altered log), and the goal
table of docs/evaluation.md is printed for the original and every alteration::

    python -m pipelines.evaluation.trace.altered \\
        --log ../shared/data/traces/KTH-SP2-1996-2.1-cln.swf.gz [--dev] \\
        [--only no-requests,no-keys] [--out DIR]
"""

from __future__ import annotations

import argparse
import gzip
import json
import random
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from panda_predictor.ingest.files import open_text
from panda_predictor.ingest.swf import trace_name
from panda_predictor.settings import load_settings
from pipelines.evaluation.trace.benchmark import (
    report_folder,
    run_benchmark,
    walk_config,
    write_outputs,
)
from pipelines.evaluation.trace.log_walk import WalkForwardConfig
from pipelines.evaluation.trace.summary import HEADER, summary_rows

#: SWF fields (0-based): requested time and memory, user, group, executable.
REQUEST_TIME, REQUEST_MEMORY, USER, GROUP, EXECUTABLE = 8, 9, 11, 12, 13
UNKNOWN = "-1"
#: Jobs kept by ``first-jobs``.
FIRST_JOBS = 3000

Jobs = list[list[str]]


def _set(jobs: Jobs, fields: tuple[int, ...], keep: Callable[[int], bool]) -> Jobs:
    """Return ``jobs`` with ``fields`` set to unknown where ``keep(i)`` is False."""
    out = []
    for i, job in enumerate(jobs):
        job = list(job)
        if not keep(i):
            for field in fields:
                if field < len(job):
                    job[field] = UNKNOWN
        out.append(job)
    return out


def no_requests(jobs: Jobs, rng: random.Random) -> Jobs:
    """Remove every job's requested time and memory."""
    return _set(jobs, (REQUEST_TIME, REQUEST_MEMORY), lambda i: False)


def half_requests(jobs: Jobs, rng: random.Random) -> Jobs:
    """Remove the requested time and memory of a random half of the jobs."""
    kept = [rng.random() < 0.5 for _ in jobs]
    return _set(jobs, (REQUEST_TIME, REQUEST_MEMORY), lambda i: kept[i])


def no_keys(jobs: Jobs, rng: random.Random) -> Jobs:
    """Remove every job's user, group and executable."""
    return _set(jobs, (USER, GROUP, EXECUTABLE), lambda i: False)


def three_users(jobs: Jobs, rng: random.Random) -> Jobs:
    """Fold the users into three accounts (by their number, modulo 3)."""
    out = []
    for job in jobs:
        job = list(job)
        if len(job) > USER and job[USER] != UNKNOWN:
            job[USER] = str(int(float(job[USER])) % 3 + 1)
        out.append(job)
    return out


def shuffled(jobs: Jobs, rng: random.Random) -> Jobs:
    """Return the job lines in a random order."""
    out = list(jobs)
    rng.shuffle(out)
    return out


def first_jobs(jobs: Jobs, rng: random.Random) -> Jobs:
    """Keep the first :data:`FIRST_JOBS` jobs."""
    return jobs[:FIRST_JOBS]


#: The alterations, in the order they are run (module doc).
ALTERATIONS: dict[str, Callable[[Jobs, random.Random], Jobs]] = {
    "no-requests": no_requests,
    "half-requests": half_requests,
    "no-keys": no_keys,
    "three-users": three_users,
    "shuffled": shuffled,
    "first-jobs": first_jobs,
}


def read_swf_lines(path: Path, field: str = "'--log' file") -> tuple[list[str], Jobs]:
    """Return an SWF log's header lines and its jobs, each a list of its fields
    as written (the alterations change fields, not values); ``field`` names the
    input in the error a file that is no SWF log gets."""
    with open_text(path) as handle:
        lines = handle.read().splitlines()
    header = [line for line in lines if line.startswith(";")]
    jobs = [line.split() for line in lines if line.strip() and not line.startswith(";")]
    if not jobs or len(jobs[0]) <= EXECUTABLE:
        raise ValueError(
            f"The {field} must be an SWF job log with at least "
            f"{EXECUTABLE + 1} fields per job. Got {path} with "
            f"{len(jobs[0]) if jobs else 0} fields in its first job line instead."
        )
    return header, jobs


def write_altered(path: Path, names: list[str], out: Path, seed: int = 1) -> list[Path]:
    """Write ``path`` altered by each of ``names`` into ``out`` (the log read
    once); return the new files, in the order of ``names``."""
    header, jobs = read_swf_lines(path)
    written = []
    for name in names:
        altered = ALTERATIONS[name](jobs, random.Random(seed))
        target = out / f"{trace_name(path)}-{name}.swf.gz"
        with gzip.open(target, "wt") as handle:
            handle.write("\n".join([*header, f"; Altered: {name} ({__name__})"]))
            handle.write("\n")
            handle.writelines(" ".join(job) + "\n" for job in altered)
        written.append(target)
    return written


def benchmark(log: Path, out: Path, config: WalkForwardConfig, dev: bool) -> Path:
    """Benchmark ``log`` as ``panda-predictor benchmark`` does, its report and
    full.json in the folder of ``out`` the command would name; return the
    full.json."""
    result = run_benchmark(log, config, dev=dev)
    return write_outputs(result, out / report_folder(log, dev))[1]


def _names(only: str | None) -> list[str]:
    """Return the alterations ``--only`` names (all by default), or exit saying
    which are known."""
    if only is None:
        return list(ALTERATIONS)
    names = [n.strip() for n in only.split(",") if n.strip()]
    wrong = [n for n in names if n not in ALTERATIONS]
    if wrong or not names:
        raise SystemExit(
            f"The '--only' option must name alterations among {list(ALTERATIONS)}. "
            f"Got {only!r} instead."
        )
    return names


def main(argv: list[str] | None = None) -> None:
    """Alter a log every way asked, benchmark each, print the goal table."""
    parser = argparse.ArgumentParser(
        description=__doc__.splitlines()[0],
        epilog=f"Alterations: {', '.join(ALTERATIONS)}.",
    )
    parser.add_argument("--log", type=Path, required=True, help="an SWF job log")
    parser.add_argument("--only", help="comma-separated alterations (default: all)")
    parser.add_argument(
        "--out",
        type=Path,
        help="folder for the altered logs and their reports (default: a new "
        "temporary folder, printed at the end)",
    )
    parser.add_argument("--dev", action="store_true", help="drop the test parts")
    parser.add_argument(
        "--skip-original", action="store_true", help="do not benchmark the log itself"
    )
    parser.add_argument(
        "--seed",
        type=int,
        default=1,
        help="seed of the random alterations (half-requests, shuffled)",
    )
    parser.add_argument(
        "--n-estimators",
        type=int,
        help="maximum XGBoost rounds, as the benchmark's option (for quick runs)",
    )
    args = parser.parse_args(argv)
    names = _names(args.only)
    out = args.out or Path(tempfile.mkdtemp(prefix="altered-"))
    out.mkdir(parents=True, exist_ok=True)
    # The command's defaults and the deployment's settings: one set for every log.
    config = walk_config(load_settings(), n_estimators=args.n_estimators)
    try:
        logs = [] if args.skip_original else [args.log]
        logs += write_altered(args.log, names, out, args.seed)
    except (OSError, ValueError) as error:
        raise SystemExit(str(error)) from None
    fulls = []
    for i, log in enumerate(logs, 1):
        started = time.perf_counter()
        fulls.append(benchmark(log, out, config, args.dev))
        print(
            f"[{i}/{len(logs)}] {trace_name(log)}: "
            f"{time.perf_counter() - started:.0f} s",
            file=sys.stderr,
            flush=True,
        )
    print(f"Altered logs, reports and full.json files: {out}", file=sys.stderr)
    print(HEADER)
    for full in fulls:
        for row in summary_rows(json.loads(full.read_text())):
            print(row)


if __name__ == "__main__":
    main()
