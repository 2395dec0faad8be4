"""Benchmark the scout_prediction route through RabbitMQ on PanDA's PostgreSQL schema.

Two runs, both on a fresh database built from PanDA's own DDL:

1. throughput: ``--tasks`` messages are published (receipts awaited), then the
   AIParameterAdjuster consumes them in received batches (``writer: sql``, one
   transaction per batch) and the applied rate is measured; the same with JEDI's
   per-message task-buffer calls (the stand-in task buffer) on ``--tb-tasks``;
2. faults: ``--tasks`` more messages are published while the plugin consumes, and
   the broker is restarted (``rabbitmqctl stop_app`` / ``start_app``) after a
   quarter was confirmed; then
   the database is checked: lost, applied twice, audited.

Usage: ``python benchmarks/bench_messages.py [--tasks 10000] [--no-write]``.
"""

from __future__ import annotations

import argparse
import os
import platform
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")

import sqlalchemy as sa  # noqa: E402

from panda_predictor.db.engine import make_engine  # noqa: E402
from panda_predictor.messages.consumer import StompConsumer  # noqa: E402
from panda_predictor.messages.publisher import (  # noqa: E402
    OutgoingMessage,
    StompPublisher,
)
from panda_predictor.messages.scout_prediction import from_prediction  # noqa: E402
from panda_predictor.plugins.ai_parameter_adjuster import (  # noqa: E402
    AIParameterAdjuster,
    Delivery,
)
from tests.message_parts import (  # noqa: E402
    StandInTaskBuffer,
    broker_settings,
    build_panda_database,
    drop_database,
    insert_tasks,
    prediction,
    require_broker,
)


def outgoing(ids: list[int]) -> list[OutgoingMessage]:
    messages = [from_prediction(prediction(i), 3600) for i in ids]
    return [
        OutgoingMessage(m.idempotency_key, m.task_id, m.to_json()) for m in messages
    ]


def handled(engine, low: int, high: int) -> int:
    with engine.connect() as conn:
        return conn.execute(
            sa.text(
                "SELECT count(*) FROM doma_panda.pp_message_applied "
                "WHERE jeditaskid BETWEEN :a AND :b"
            ),
            {"a": low, "b": high},
        ).scalar()


def make_plugin(engine, writer: str) -> AIParameterAdjuster:
    params = {"engine": engine, "writer": writer}
    if writer == "task_buffer":
        params["task_buffer"] = StandInTaskBuffer(engine)
    plugin = AIParameterAdjuster(**params)
    plugin.initialize()
    return plugin


def consume(settings, plugins, engine, low, high, batch_size) -> tuple[float, list]:
    """Consume with one consumer per plugin (JEDI's ``n_threads``) until every task
    in [low, high] was handled; return the seconds and the consumers."""
    n = high - low + 1
    done = threading.Event()
    consumers, threads = [], []
    for plugin in plugins:

        def handle(batch, plugin=plugin):
            plugin.process_batch([Delivery(m.message_id, m.body) for m in batch])

        consumer = StompConsumer(settings, handle, batch_size=batch_size)
        consumers.append(consumer)
        threads.append(
            threading.Thread(
                target=consumer.run, kwargs={"until": done.is_set}, daemon=True
            )
        )
    started = time.perf_counter()
    for thread in threads:
        thread.start()
    while handled(engine, low, high) < n:
        time.sleep(0.05)  # the rate's resolution: 1-2 % of a 10,000-message run
    elapsed = time.perf_counter() - started
    done.set()
    for thread in threads:
        thread.join(30)
    return elapsed, consumers


def _load(averages: tuple[float, float, float]) -> str:
    return " / ".join(f"{a:.1f}" for a in averages)


def rabbitmqctl(*args: str) -> None:
    subprocess.run(["rabbitmqctl", *args], check=True, capture_output=True, timeout=120)


@dataclass
class FaultRun:
    """What the fault run saw: messages confirmed, handled, applied, redelivered."""

    seconds: float
    restart: dict[str, float]
    confirmed: int
    audited: int
    applied: int
    deliveries: int
    still_scouted: int
    publisher_reconnects: int
    consumer_reconnects: int


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--tasks",
        type=int,
        default=10_000,
        help="messages (one per task) of the SQL-writer throughput run, and again of "
        "the fault run (default: %(default)s)",
    )
    parser.add_argument(
        "--tb-tasks",
        type=int,
        default=2_000,
        help="messages of the throughput run through the task-buffer calls "
        "(default: %(default)s)",
    )
    parser.add_argument(
        "--batch-size",
        type=int,
        default=200,
        help="most messages a consumer receives and applies as one batch "
        "(default: %(default)s)",
    )
    parser.add_argument(
        "--publish-batch",
        type=int,
        default=500,
        help="messages per publish call in the throughput runs (default: %(default)s)",
    )
    parser.add_argument(
        "--threads",
        type=int,
        default=2,
        help="plugin instances consuming at once (JEDI's n_threads)",
    )
    parser.add_argument(
        "--no-write",
        action="store_true",
        help="print the figures only; leave docs/performance.md as it is",
    )
    args = parser.parse_args()
    require_broker()
    load_before = os.getloadavg()
    home = Path(tempfile.mkdtemp(prefix="bench_messages_"))
    name, base = build_panda_database(home)
    os.environ["PANDA_PREDICTOR_DB_URL"] = base.db_url
    os.environ["PANDA_PREDICTOR_DB_SCHEMA"] = "doma_panda"
    engine = make_engine(base)
    rows: list[str] = []
    try:
        # 1. throughput, SQL writer (one transaction per received batch)
        ids = list(range(1, args.tasks + 1))
        publish_s, sql_s = run_throughput(base, engine, args, ids, "sql")
        # 1b. JEDI's per-message task-buffer calls (stand-in task buffer)
        tb_ids = list(range(100_001, 100_001 + args.tb_tasks))
        _, tb_s = run_throughput(base, engine, args, tb_ids, "task_buffer")
        # 2. faults: publish while consuming, broker restarted mid-stream
        fault = run_faults(base, engine, args)
        rows = report(args, load_before, publish_s, sql_s, tb_s, fault)
    finally:
        engine.dispose()
        drop_database(name)
    text = "\n".join(rows)
    print(text)
    if not args.no_write:
        sys.path.insert(0, str(ROOT / "benchmarks"))
        from perfdoc import write_section

        write_section("bench_messages", text)


def run_throughput(
    base, engine, args: argparse.Namespace, ids: list[int], writer: str
) -> tuple[float, float]:
    """Publish one message per task, then consume them all with ``writer``.

    Returns the seconds the publishing took (every receipt awaited) and the
    seconds until every message was handled.
    """
    settings = broker_settings(base)
    insert_tasks(engine, ids)
    publisher = StompPublisher(settings)
    started = time.perf_counter()
    for start in range(0, len(ids), args.publish_batch):
        publisher.publish(outgoing(ids[start : start + args.publish_batch]))
    publish_s = time.perf_counter() - started
    publisher.close()
    consume_s, _ = consume(
        settings,
        [make_plugin(engine, writer) for _ in range(args.threads)],
        engine,
        ids[0],
        ids[-1],
        args.batch_size,
    )
    return publish_s, consume_s


def run_faults(base, engine, args: argparse.Namespace) -> FaultRun:
    """Publish ``--tasks`` messages while they are consumed, restart the broker
    after a quarter was confirmed, and check the database afterwards."""
    n = args.tasks
    fault = broker_settings(
        base, broker_receipt_timeout_seconds=5.0, broker_retry_seconds=120.0
    )
    f_ids = list(range(200_001, 200_001 + n))
    insert_tasks(engine, f_ids)
    confirmed: dict[str, str] = {}
    publisher = StompPublisher(fault)
    halfway = threading.Event()

    def send() -> None:
        for start in range(0, n, 100):
            confirmed.update(publisher.publish(outgoing(f_ids[start : start + 100])))
            if len(confirmed) >= n // 4:
                halfway.set()  # rabbitmqctl takes ~2 s to act: mid-stream
            time.sleep(0.05)

    sender = threading.Thread(target=send, daemon=True)
    plugin = make_plugin(engine, "sql")
    restart: dict[str, float] = {}

    def restart_broker() -> None:
        halfway.wait()
        t0 = time.perf_counter()
        rabbitmqctl("stop_app")
        restart["stop"] = time.perf_counter() - t0
        rabbitmqctl("start_app")
        restart["total"] = time.perf_counter() - t0

    restarter = threading.Thread(target=restart_broker, daemon=True)
    sender.start()
    restarter.start()
    fault_s, consumers = consume(
        fault,
        [plugin] + [make_plugin(engine, "sql") for _ in range(args.threads - 1)],
        engine,
        f_ids[0],
        f_ids[-1],
        args.batch_size,
    )
    sender.join(300)
    restarter.join(300)
    publisher.close()
    check, still_scouted = check_database(engine, f_ids[0], f_ids[-1])
    return FaultRun(
        seconds=fault_s,
        restart=restart,
        confirmed=len(confirmed),
        audited=check.audited,
        applied=check.applied,
        deliveries=check.deliveries,
        still_scouted=still_scouted,
        publisher_reconnects=publisher.reconnects,
        consumer_reconnects=sum(c.reconnects for c in consumers),
    )


def check_database(engine, low: int, high: int) -> tuple[Any, int]:
    """Return the audit counts of tasks ``low..high`` and how many still hold US=."""
    with engine.connect() as conn:
        check = conn.execute(
            sa.text(
                "SELECT count(*) AS audited, "
                "count(*) FILTER (WHERE outcome = 'applied') AS applied, "
                "sum(deliveries) AS deliveries FROM doma_panda.pp_message_applied "
                "WHERE jeditaskid BETWEEN :a AND :b"
            ),
            {"a": low, "b": high},
        ).one()
        still_scouted = conn.execute(
            sa.text(
                "SELECT count(*) FROM doma_panda.jedi_tasks WHERE jeditaskid "
                "BETWEEN :a AND :b AND splitrule LIKE '%US=%'"
            ),
            {"a": low, "b": high},
        ).scalar()
    return check, still_scouted


def report(
    args: argparse.Namespace,
    load_before: tuple[float, float, float],
    publish_s: float,
    sql_s: float,
    tb_s: float,
    fault: FaultRun,
) -> list[str]:
    """Return the section of docs/performance.md, as lines."""
    n = args.tasks
    lost = n - fault.audited
    twice = fault.audited - fault.applied if fault.applied <= n else 0
    machine = (
        f"{platform.machine()}, {os.cpu_count()} cores, Python "
        f"{platform.python_version()}, local PostgreSQL and RabbitMQ "
        "(STOMP plugin, persistent messages)"
    )
    command = (
        f"python benchmarks/bench_messages.py --tasks {n} --tb-tasks "
        f"{args.tb_tasks} --batch-size {args.batch_size} --threads {args.threads}"
    )
    load_after = os.getloadavg()
    return [
        "## scout_prediction messages (benchmarks/bench_messages.py)",
        "",
        f"Measured {datetime.now(UTC):%Y-%m-%d %H:%M} UTC on {machine}; "
        f"load average (1 / 5 / 15 min) {_load(load_before)} before, "
        f"{_load(load_after)} after (the machine is shared); "
        f"command: `{command}`. "
        "PanDA's own PostgreSQL DDL (schema doma_panda); "
        f"{args.threads} plugin instances (JEDI's `n_threads`) consume in "
        f"received batches of up to {args.batch_size}.",
        "",
        "| measure | value |",
        "|---|---:|",
        f"| publish {n:,} messages, every receipt awaited | {publish_s:.1f} s "
        f"({n / publish_s:,.0f} messages/s) |",
        f"| applied on PostgreSQL, `writer: sql` (one transaction per received "
        f"batch) | {n / sql_s:,.0f} messages/s ({n:,} in {sql_s:.1f} s) |",
        f"| applied through JEDI's per-message task-buffer calls (stand-in task "
        f"buffer) | {args.tb_tasks / tb_s:,.0f} messages/s ({args.tb_tasks:,} in "
        f"{tb_s:.1f} s) |",
        f"| {n:,} messages published while consumed, broker restarted mid-stream: "
        f"stop_app + start_app | {fault.restart.get('total', float('nan')):.1f} s |",
        f"| same run, until every message was handled | {fault.seconds:.1f} s |",
        f"| confirmed by receipt / audited in pp_message_applied | "
        f"{fault.confirmed:,} / {fault.audited:,} |",
        f"| lost (confirmed, never handled) | {lost:,} |",
        f"| applied / applied twice | {fault.applied:,} / {twice:,} |",
        f"| deliveries counted (redelivered copies changed nothing) | "
        f"{fault.deliveries:,} |",
        f"| tasks still holding US= afterwards | {fault.still_scouted:,} |",
        f"| publisher / consumer reconnects | {fault.publisher_reconnects} / "
        f"{fault.consumer_reconnects} |",
    ]


if __name__ == "__main__":
    main()
