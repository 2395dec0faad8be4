"""Benchmark four database hooks beside a JEDI-like writer on PanDA's real schema.

On a fresh database built from PanDA's own PostgreSQL DDL (``build.sh``),
``simulate`` writes a small history and ``--defined`` newly defined tasks; a small
XGBoost bundle is trained on the history and saved. Then, all at once:

- four hook processes each run one ``hook --once`` pass over the defined tasks
  (``SubmitHook.run_once``; their advisory claims keep them off each other's
  batches);
- a JEDI-like writer process repeats JEDI's pattern on the same tasks: it reads a
  task ``SELECT ... FOR UPDATE NOWAIT``, works on it for a while holding the row,
  then updates a neighbouring task (same hook batch: the shape that deadlocked in
  issue 21) and the task itself, and commits. Like JEDI it works through the
  oldest defined tasks first, so it picks its tasks where the hooks are. It times
  every statement that may wait and counts NOWAIT refusals, deadlocks and any
  other lock error.

When the four passes are done the writer stops, and one more pass (JEDI gone)
writes what was skipped as locked. Deadlocks are counted on both sides and by the
server (``pg_stat_database.deadlocks``). Prints the figures and writes them to
docs/performance.md (unless ``--no-write``).

    python benchmarks/bench_hook_locks.py --defined 10000
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))
os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")

from hook_locks_parts import (  # noqa: E402
    JediResult,
    database_counts,
    hook_pass,
    jedi_like_writer,
    prepare_database,
)

from tests.message_parts import drop_database  # noqa: E402


def main() -> None:
    args = arguments()
    load_before = os.getloadavg()
    home = Path(tempfile.mkdtemp(prefix="bench_hook_locks_"))
    started = time.perf_counter()
    name, settings, bundle_dir, ids = prepare_database(
        home, args.history, args.defined, args.seed
    )
    setup_s = time.perf_counter() - started
    ctx = mp.get_context("spawn")
    try:
        before = database_counts(settings, name)
        config = (settings.db_url, str(home), args.batch_size)
        pass_s, passes, jedi_result = hooks_beside_jedi(
            ctx, config, str(bundle_dir), ids, args
        )
        catch_up = catch_up_pass(ctx, config, str(bundle_dir))
        after = database_counts(settings, name)
    finally:
        drop_database(name)

    text = report(
        args,
        load_before,
        setup_s,
        pass_s,
        passes,
        catch_up,
        jedi_result,
        before,
        after,
    )
    print(text)
    if not args.no_write:
        from perfdoc import write_section

        write_section("bench_hook_locks", text)


def arguments() -> argparse.Namespace:
    """Parse the command line."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--defined",
        type=int,
        default=10_000,
        help="newly defined tasks the hooks and the JEDI-like writer work on "
        "(default: %(default)s)",
    )
    parser.add_argument(
        "--history",
        type=int,
        default=3_000,
        help="simulated finished tasks in the history the model is trained on "
        "(default: %(default)s)",
    )
    parser.add_argument(
        "--hooks",
        type=int,
        default=4,
        help="hook processes run at once, one pass each (default: %(default)s)",
    )
    parser.add_argument(
        "--batch-size",
        type=int,
        default=200,
        help="tasks per hook batch (hook_batch_size), each written in one transaction "
        "(default: %(default)s)",
    )
    parser.add_argument(
        "--jedi-hold-ms",
        type=float,
        default=50.0,
        help="longest time JEDI works on a task while holding its row (uniform)",
    )
    parser.add_argument(
        "--jedi-long-hold-s",
        type=float,
        default=3.0,
        help="every 50th JEDI transaction holds its row this long",
    )
    parser.add_argument(
        "--seed",
        type=int,
        default=21,
        help="seed of the simulated history and of the JEDI-like writer's choices "
        "(default: %(default)s)",
    )
    parser.add_argument(
        "--no-write",
        action="store_true",
        help="print the figures only; leave docs/performance.md as it is",
    )
    return parser.parse_args()


def hooks_beside_jedi(ctx, config, bundle_dir: str, ids, args) -> tuple:
    """Run ``--hooks`` hook passes together with the JEDI-like writer.

    Returns the seconds until every pass ended, each pass's result and the
    writer's.
    """
    go, stop = ctx.Event(), ctx.Event()
    ready = ctx.Barrier(args.hooks + 2)
    results = ctx.Queue()
    hooks = [
        ctx.Process(
            target=hook_pass,
            args=(config, bundle_dir, ready, go, results, f"hook-{n}"),
        )
        for n in range(args.hooks)
    ]
    jedi = ctx.Process(
        target=jedi_like_writer,
        args=(
            config[0],
            ids,
            (args.jedi_hold_ms / 1000, args.jedi_long_hold_s, 50),
            args.hooks * args.batch_size,
            args.seed,
            ready,
            go,
            stop,
            results,
        ),
    )
    for process in (*hooks, jedi):
        process.start()
    ready.wait()  # every hook has its model and history: start together
    go.set()
    t0 = time.perf_counter()
    passes = [results.get() for _ in hooks]
    pass_s = time.perf_counter() - t0
    stop.set()
    jedi_result: JediResult = results.get()
    for process in (*hooks, jedi):
        process.join(60)
    return pass_s, passes, jedi_result


def catch_up_pass(ctx, config, bundle_dir: str):
    """Run one more pass with JEDI gone: it writes what the others skipped."""
    later = ctx.Queue()
    catch_up_ready = ctx.Barrier(1)
    catch_up_go = ctx.Event()
    catch_up_go.set()
    last = ctx.Process(
        target=hook_pass,
        args=(config, bundle_dir, catch_up_ready, catch_up_go, later, "catch-up"),
    )
    last.start()
    catch_up = later.get()
    last.join(60)
    return catch_up


def report(
    args, load_before, setup_s, pass_s, passes, catch_up, jedi, before, after
) -> str:
    """Return the markdown section of the run."""
    written = sum(p.applied for p in passes)
    locked = sum(p.locked_by_jedi for p in passes)
    hook_deadlocks = sum(p.deadlocks for p in passes)
    hook_lock_errors = sum(p.lock_errors for p in passes)
    failures = [p.failure for p in passes if p.failure]
    held = [s for p in passes for s in p.writes] or [0.0]
    command = (
        f"python benchmarks/bench_hook_locks.py --defined {args.defined} --history "
        f"{args.history} --hooks {args.hooks} --batch-size {args.batch_size} "
        f"--jedi-hold-ms {args.jedi_hold_ms:g} --jedi-long-hold-s "
        f"{args.jedi_long_hold_s:g} --seed {args.seed}"
    )
    load = " / ".join(f"{a:.1f}" for a in load_before)
    load_after = " / ".join(f"{a:.1f}" for a in os.getloadavg())
    rows = [
        "## Four hooks beside a JEDI-like writer (benchmarks/bench_hook_locks.py)",
        "",
        f"Measured {time.strftime('%Y-%m-%d %H:%M')} on {platform.machine()}, "
        f"{os.cpu_count()} cores, Python {platform.python_version()}, local "
        f"PostgreSQL; load average (1 / 5 / 15 min) {load} at the start, "
        f"{load_after} at the end (the machine is shared). Command: "
        f"`{command}`. PanDA's own DDL (build.sh, schema doma_panda), filled by "
        f"`simulate` ({args.history:,} finished tasks, {args.defined:,} defined); "
        f"XGBoost bundle (30 trees per target) trained on that history; setup "
        f"{setup_s:.0f} s. {args.hooks} hook processes, one pass each "
        f"(`run_once`, batches of {args.batch_size}, lock timeout 1 s), started "
        "together with one JEDI-like writer process working where the hooks work "
        f"(a task among the {args.hooks * args.batch_size:,} after the highest one "
        "audited so far): `SELECT ... FOR UPDATE "
        f"NOWAIT` on it, its work for 0-{args.jedi_hold_ms:g} ms holding the "
        f"row ({args.jedi_long_hold_s:g} s every 50th time), then `UPDATE` of a "
        "task 1-50 ids further (the same hook batch) and of the task, commit.",
        "",
        "| measure | value |",
        "|---|---:|",
        f"| deadlocks seen by the JEDI-like writer | {jedi.deadlocks} |",
        f"| deadlocks seen by the hooks | {hook_deadlocks} |",
        f"| deadlocks counted by the server (pg_stat_database) | "
        f"{after['deadlocks'] - before['deadlocks']} |",
        f"| JEDI-like writer: longest wait (one statement) | "
        f"{jedi.longest_wait * 1000:.1f} ms |",
        f"| JEDI-like writer: waits over 1 s / over 100 ms | {jedi.waits_over_1s} / "
        f"{jedi.waits_over_100ms} |",
        f"| JEDI-like writer: transactions committed / NOWAIT refused (row held by "
        f"a hook) / other lock errors | {jedi.committed:,} / {jedi.nowait_refused:,} "
        f"/ {jedi.other_lock_errors} |",
        f"| hooks: lock errors (lock timeout, NOWAIT, deadlock) / failed passes | "
        f"{hook_lock_errors} / {len(failures)} |",
        f"| hooks: write transactions (row locks held), p50 / longest | "
        f"{statistics.median(held) * 1000:.1f} / {max(held) * 1000:.1f} ms |",
        f"| tasks written by the four passes / skipped as locked by JEDI | "
        f"{written:,} / {locked:,} |",
        f"| kept scouts / moved by JEDI / errors audited | "
        f"{sum(p.kept_scouts for p in passes):,} / "
        f"{sum(p.moved_by_jedi for p in passes):,} / "
        f"{sum(p.errors for p in passes)} |",
        f"| pass time, four hooks together (slowest hook) | {pass_s:.1f} s "
        f"({max(p.seconds for p in passes):.1f} s) |",
        f"| later pass, JEDI gone: tasks written / still locked | "
        f"{catch_up.applied:,} / {catch_up.locked_by_jedi:,} |",
        f"| defined tasks still eligible at the end | {after['eligible']:,} |",
    ]
    if failures:
        rows += ["", "Failed passes: " + "; ".join(failures)]
    return "\n".join(rows)


if __name__ == "__main__":
    main()
