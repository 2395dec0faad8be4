"""HTTP benchmark: p50/p99 latency and sustained requests/s of ``POST /v1/predictions``.

Starts ``panda-predictor serve`` (waitress) on 127.0.0.1 on a free port as a
subprocess, with the champion of a demo home (``--home``, made by ``panda-predictor
demo``) or a bundle folder (``--bundle``), then runs a bounded, paced Python load
generator on loopback: ``--rate`` requests/s for ``--seconds`` over ``--threads``
persistent connections, one task definition per request. Latency is measured from
the request's *scheduled* send time to the end of its response, so a stalled server
is not hidden by a load generator that waits for it (no coordinated omission).
Prints the figures and writes them into docs/performance.md under "HTTP service".

    python benchmarks/bench_http.py --home /tmp/x --rate 200 --seconds 20
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import platform
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
HEADING = "## HTTP service"

TASKS = [
    {
        "processingType": "simul",
        "prodSourceLabel": "managed",
        "transPath": "Sim_tf.py",
        "transHome": "AtlasOffline-23.0.5",
        "coreCount": 8,
        "taskName": "bench.simul",
    },
    {
        "processingType": "deriv",
        "prodSourceLabel": "managed",
        "transPath": "Derivation_tf.py",
        "transHome": "AthDerivation-24.0.12",
        "coreCount": 1,
        "nFiles": 20,
        "nEvents": 200000,
    },
    {
        "processingType": "evgen",
        "prodSourceLabel": "managed",
        "transPath": "Gen_tf.py",
        "transHome": "AthGeneration-23.6.30",
        "coreCount": 1,
        "inDS": ["mc23.EVNT"],
    },
]


def free_port() -> int:
    """Return a TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def serve_command(port: int, threads: int, bundle: str | None) -> list[str]:
    """Return the command that starts the service (registered CLI or module)."""
    from panda_predictor.cli import COMMANDS

    if "serve" in COMMANDS:
        cmd = [str(Path(sys.executable).with_name("panda-predictor")), "serve"]
    else:
        cmd = [sys.executable, "-m", "panda_predictor.cli.serve"]
    cmd += [
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--threads",
        str(threads),
        "--history-refresh",
        "0",
    ]
    return cmd + (["--bundle", bundle] if bundle else [])


def wait_ready(port: int, timeout: float = 120.0) -> None:
    """Wait until /readyz answers 200 (the model is loaded)."""
    deadline = time.monotonic() + timeout
    last = ""
    while time.monotonic() < deadline:
        try:
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
            conn.request("GET", "/readyz")
            response = conn.getresponse()
            last = response.read().decode()
            if response.status == 200:
                return
        except OSError as exc:
            last = str(exc)
        time.sleep(0.5)
    raise SystemExit(f"The service did not become ready in {timeout} s: {last}")


def run_load(port: int, rate: float, seconds: float, threads: int) -> dict[str, float]:
    """Send ``rate * seconds`` paced requests; return latency and throughput figures."""
    total = int(rate * seconds)
    bodies = [json.dumps(t).encode() for t in TASKS]
    latencies = np.full(total, np.nan)
    errors: list[str] = []
    counter = iter(range(total))
    lock = threading.Lock()
    start = time.perf_counter() + 0.2

    def worker() -> None:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        while True:
            with lock:
                i = next(counter, None)
            if i is None:
                break
            due = start + i / rate
            delay = due - time.perf_counter()
            if delay > 0:
                time.sleep(delay)
            try:
                conn.request(
                    "POST",
                    "/v1/predictions",
                    body=bodies[i % len(bodies)],
                    headers={"Content-Type": "application/json"},
                )
                response = conn.getresponse()
                response.read()
                if response.status != 200:
                    errors.append(f"status {response.status}")
            except (OSError, http.client.HTTPException) as exc:
                errors.append(repr(exc))
                conn.close()
                conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
                continue
            latencies[i] = time.perf_counter() - due
        conn.close()

    pool = [threading.Thread(target=worker) for _ in range(threads)]
    for t in pool:
        t.start()
    for t in pool:
        t.join()
    elapsed = time.perf_counter() - start
    done = latencies[~np.isnan(latencies)] * 1000.0
    return {
        "requests": float(total),
        "errors": float(len(errors)),
        "elapsed_s": elapsed,
        "throughput": len(done) / elapsed,
        "p50_ms": float(np.percentile(done, 50)),
        "p90_ms": float(np.percentile(done, 90)),
        "p99_ms": float(np.percentile(done, 99)),
        "max_ms": float(done.max()),
    }


def main() -> None:
    """Start the server, load it, stop it, report."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--home", help="demo home with a registered champion")
    source.add_argument("--bundle", help="bundle folder to serve instead")
    parser.add_argument(
        "--rate",
        type=float,
        nargs="+",
        default=[200.0],
        help="offered request rates, one run each",
    )
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--client-threads", type=int, default=8)
    parser.add_argument(
        "--server-threads",
        type=int,
        default=os.cpu_count() or 2,
        help="waitress threads (default: one per CPU, as 'serve' does)",
    )
    parser.add_argument(
        "--no-write",
        action="store_true",
        help="print only; leave docs/performance.md alone",
    )
    args = parser.parse_args()

    load_before = os.getloadavg()[0]
    port = free_port()
    env = dict(
        os.environ,
        MLFLOW_DISABLE_TELEMETRY="true",
        TF_CPP_MIN_LOG_LEVEL="2",
        PANDA_PREDICTOR_LOG_LEVEL="WARNING",
    )
    if args.home:
        env["PANDA_PREDICTOR_HOME"] = args.home
    cmd = serve_command(port, args.server_threads, args.bundle)
    server = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL)
    try:
        wait_ready(port)
        run_load(port, 50.0, 2.0, 2)  # warm-up: first requests build caches
        results = [
            (rate, run_load(port, rate, args.seconds, args.client_threads))
            for rate in args.rate
        ]
    finally:
        server.terminate()
        server.wait(timeout=30)
    print(json.dumps(dict(results), indent=1))
    rows = "\n".join(
        f"| {rate:.0f}/s | {args.seconds:.0f} s | {r['requests']:.0f} | "
        f"{r['errors']:.0f} | {r['throughput']:.1f} | {r['p50_ms']:.1f} ms | "
        f"{r['p90_ms']:.1f} ms | {r['p99_ms']:.1f} ms | {r['max_ms']:.1f} ms |"
        for rate, r in results
    )
    source = f"bundle {args.bundle}" if args.bundle else f"champion of {args.home}"
    at_goal = [r for rate, r in results if rate >= 200]
    verdict = (
        "**met**"
        if at_goal and all(r["p99_ms"] < 20 and r["errors"] == 0 for r in at_goal)
        else "**not met** in this run"
    )
    section = f"""{HEADING}

`benchmarks/bench_http.py`: `panda-predictor serve` (waitress, {args.server_threads}
threads, {source}, no history refresh) on 127.0.0.1, and a
paced Python load generator in a second process on the same 2-core host
({args.client_threads} keep-alive connections, one task definition per `POST
/v1/predictions`, each answer with 4 targets and their top SHAP features). Latency
is counted from each request's scheduled send time (no coordinated omission).
Measured {time.strftime("%Y-%m-%d")} on {platform.machine()}, {os.cpu_count()} cores,
Python {platform.python_version()}; 1-minute load average before the run
{load_before:.1f} (other work shares the host, so these figures are pessimistic).

| offered | duration | requests | errors | sustained req/s | p50 | p90 | p99 | max |
|---|---|---|---|---|---|---|---|---|
{rows}

Goal (issue 4): p99 under 20 ms at 200 requests/s with zero errors: {verdict}.

One request costs about 4.6 ms of CPU in-process (Flask test client, one task, four
targets with SHAP explanations, measured with cProfile off): validation and the
records fast path of the predictor (~1 ms), the SHAP explanations (~2 ms), Flask,
JSON and metrics. Waitress runs the requests on threads that share the GIL, so on
2 cores shared with the load generator the tail grows with the host's load.
"""
    if not args.no_write:
        from perfdoc import PERFORMANCE_MD, write_section

        write_section("bench_http", section)
        print(f"written to {PERFORMANCE_MD}")
    failed = sum(r["errors"] for _, r in results)
    if failed:
        raise SystemExit(f"{failed:.0f} requests failed")


if __name__ == "__main__":
    main()
