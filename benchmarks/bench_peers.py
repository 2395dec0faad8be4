"""Benchmark the published sizing methods (core/replay/peers.py) on a worst-case
history.

A seeded synthetic log: ``--jobs`` jobs over about 3,000 keys (Zipf sizes), each
job an hour long on average, so nearly every job sees its own window of the 100
newest ended jobs of its key (few shared windows: the slow case). Each method runs
``--repeat`` times; the best wall and CPU times go to stdout and to
docs/performance.md.

    python benchmarks/bench_peers.py --jobs 250000
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from panda_predictor.core.replay.peers import PEER_METHODS, peer_requests  # noqa: E402


def history(n_jobs: int, seed: int) -> dict[str, np.ndarray]:
    """Return the columns of a synthetic history of ``n_jobs`` jobs."""
    rng = np.random.default_rng(seed)
    submit = np.sort(rng.uniform(0, 3e7, n_jobs))
    x = rng.choice([1.0, 2.0, 4.0, 8.0, 16.0, 32.0], n_jobs)
    used = x * rng.lognormal(0.0, 0.5, n_jobs) * 100.0
    return {
        "key": rng.zipf(1.5, n_jobs) % 3000,
        "submit_s": submit,
        "known_s": submit + rng.exponential(3600.0, n_jobs),
        "used": used,
        "cap": np.where(rng.random(n_jobs) < 0.5, np.inf, used * 3.0),
        "x": x,
    }


def main(argv: list[str] | None = None) -> int:
    """Time each method and write the figures."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=250_000, help="synthetic jobs")
    parser.add_argument("--repeat", type=int, default=3, help="runs per method")
    parser.add_argument("--seed", type=int, default=20261201, help="random seed")
    parser.add_argument(
        "--no-doc", action="store_true", help="print only, leave docs/ alone"
    )
    args = parser.parse_args(argv)
    columns = history(args.jobs, args.seed)
    n_keys = np.unique(columns["key"]).size
    lines = [
        "## Published sizing methods (core/replay/peers.py)",
        "",
        f"Synthetic history: {args.jobs:,} jobs, {n_keys:,} keys, window 100; best "
        f"of {args.repeat} runs; {platform.machine()}, {time.strftime('%Y-%m-%d')}, "
        f"load average {os.getloadavg()[0]:.1f} at the start "
        "(`python benchmarks/bench_peers.py`). CPU time is the process's; the "
        "wall time also counts the other processes sharing the machine.",
        "",
        "| method | wall s | CPU s |",
        "|---|---|---|",
    ]
    for method in PEER_METHODS:
        walls, cpus = [], []
        for _ in range(args.repeat):
            wall, cpu = time.perf_counter(), time.process_time()
            peer_requests(method, **columns)
            walls.append(time.perf_counter() - wall)
            cpus.append(time.process_time() - cpu)
        lines.append(f"| `{method}` | {min(walls):.2f} | {min(cpus):.2f} |")
    body = "\n".join(lines)
    print(body)
    if not args.no_doc:
        from perfdoc import write_section

        write_section("bench_peers", body)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
