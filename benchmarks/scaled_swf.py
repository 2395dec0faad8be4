"""Write a larger SWF log made of copies of a real one, to probe size and key count.

The benchmark is also run on logs we do not have, some far larger than ours. Each
copy of the source's jobs gets job numbers of its own and is shifted in time; with
``--own-users`` its users get numbers of their own too, so every key (user, user and
executable) is new in each copy. The copies say nothing about real workloads; they
show how time and memory grow with jobs, span and keys (docs/performance.md,
"History features on logs with many keys").

    # 520,938 jobs over 39 months, 97,821 user-executable keys
    python benchmarks/scaled_swf.py Sandia-Ross-2001-1.1-cln.swf.gz ross9x.swf.gz \\
        --copies 9 --shift 997 --own-users
    # 752,164 jobs over 44 days: each copy after the one before
    python benchmarks/scaled_swf.py LCG-2005-1.swf.gz lcg4x.swf.gz --copies 4 --after
    panda-predictor benchmark --log ross9x.swf.gz --no-mlflow
"""

from __future__ import annotations

import argparse
import gzip
from pathlib import Path

from pipelines.evaluation.trace.altered import USER, read_swf_lines

#: SWF fields (0-based) rewritten here besides the user: job number, submit time.
JOB, SUBMIT = 0, 1


def scaled_jobs(
    jobs: list[list[str]], copies: int, shift_s: int, own_users: bool
) -> list[list[str]]:
    """Return ``copies`` copies of ``jobs`` in submit order, copy k shifted k x shift_s.

    Job and, with ``own_users``, user numbers are offset past every number of the
    source, so none repeats across copies (an unknown user, -1, stays).
    """
    top_job = max(int(f[JOB]) for f in jobs)
    top_user = max(int(f[USER]) for f in jobs)
    out = []
    for k in range(copies):
        for fields in jobs:
            copy = list(fields)
            copy[JOB] = str(int(fields[JOB]) + k * (top_job + 1))
            copy[SUBMIT] = str(int(fields[SUBMIT]) + k * shift_s)
            if own_users and int(fields[USER]) >= 0:
                copy[USER] = str(int(fields[USER]) + k * (top_user + 1))
            out.append(copy)
    out.sort(key=lambda f: int(f[SUBMIT]))
    return out


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("source", type=Path, help="an SWF log, plain or gzip")
    parser.add_argument("out", type=Path, help="the SWF log to write (gzip if .gz)")
    parser.add_argument("--copies", type=int, default=4, help="copies (default 4)")
    where = parser.add_mutually_exclusive_group()
    where.add_argument(
        "--shift", type=int, default=997, help="seconds between copies (default 997)"
    )
    where.add_argument(
        "--after",
        action="store_true",
        help="each copy starts one hour after the one before ends",
    )
    parser.add_argument(
        "--own-users", action="store_true", help="give each copy users of its own"
    )
    args = parser.parse_args(argv)
    if args.copies < 1:
        parser.error(f"--copies must be at least 1. Got {args.copies} instead.")
    try:
        header, jobs = read_swf_lines(args.source, field="source")
    except ValueError as exc:
        parser.error(str(exc))
    shift = args.shift
    if args.after:
        submits = [int(f[SUBMIT]) for f in jobs]
        shift = max(submits) - min(submits) + 3600
    scaled = scaled_jobs(jobs, args.copies, shift, args.own_users)
    opener = gzip.open if args.out.suffix == ".gz" else open
    with opener(args.out, "wt") as fh:
        fh.writelines(line + "\n" for line in header)
        fh.writelines(" ".join(fields) + "\n" for fields in scaled)
    print(f"Wrote {len(scaled):,} jobs ({args.copies} copies) to {args.out}")


if __name__ == "__main__":
    main()
