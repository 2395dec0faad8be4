"""Benchmark training: wall time and peak memory per history size, and quality.

Simulated PanDA history is generated in memory (no database: the database paths
have their own benchmark), labelled with the scout formulas, and trained with the
production code (:func:`pipelines.training.train.train`) and the served training
parameters (``pipelines/params/training.yaml``), XGBoost for all four targets and, up to
``--keras-max`` tasks, the Keras network too. ``--set FIELD=VALUE`` overrides one
parameter (``xgboost.learning_rate=0.1``), to compare levers. Peak memory is the
process's maximum RSS. Figures go to stdout and to docs/performance.md.

    python benchmarks/bench_training.py --sizes 100000 1000000 4000000 \
        --keras-max 1000000
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")


def training_config(kinds: list[str], overrides: list[str]) -> Any:
    """Return the served training config with ``kinds`` and ``FIELD=VALUE`` overrides.

    The config is :func:`pipelines.training.config.training_config`'s.

    Values are YAML (``null``, ``0.3``, ``auto``); a dotted field sets one model
    parameter (``xgboost.n_estimators=150``).
    """
    import dataclasses

    import yaml

    from panda_predictor.settings import load_settings
    from pipelines.training.config import training_config as served_config

    config = served_config(load_settings(), kinds=tuple(kinds))
    for item in overrides:
        field, sep, text = item.partition("=")
        if not sep:
            raise SystemExit(f"--set must be FIELD=VALUE. Got {item!r} instead.")
        section, _, name = field.partition(".")
        value = yaml.safe_load(text)
        if name:
            value = {**getattr(config, section), name: value}
        config = dataclasses.replace(config, **{section: value})
    return config


def one_run(n_tasks: int, kinds: list[str], seed: int, overrides: list[str]) -> dict:
    """Simulate, label and train once in this process; return the figures."""
    import pandas as pd

    from panda_predictor.bins_file import load_bins
    from pipelines.simulation import SimulationConfig, simulate_history
    from pipelines.training.dataset import LabelledHistory, frames_to_history
    from pipelines.training.train import train

    config_used = training_config(kinds, overrides)

    started = time.perf_counter()
    config = SimulationConfig(n_tasks=n_tasks, seed=seed, batch_size=100_000)
    # One expression, so the batches are freed once concatenated: peak memory is
    # then the training's, not the simulation's.
    frame = pd.concat(
        [frames_to_history(*b) for b in simulate_history(config, progress=False)],
        ignore_index=True,
    )
    frame = frame[
        frame[["ramcount", "cputime", "iointensity", "walltime"]].notna().any(axis=1)
    ]
    frame = frame.sort_values(["creationdate", "jeditaskid"]).reset_index(drop=True)
    history = LabelledHistory(frame)
    prepared = time.perf_counter() - started
    started = time.perf_counter()
    result = train(history, load_bins(), config_used)
    trained = time.perf_counter() - started
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    quality = {}
    for kind, res in result.kinds.items():
        ev = res.evaluation
        quality[kind] = {
            "mean_accuracy": ev.mean_accuracy,
            "exact_match": ev.exact_match_rate,
            "at_least": {str(k): v for k, v in ev.at_least_right.items()},
            "targets": {
                t: {
                    "accuracy": e.accuracy,
                    "macro_f1": e.macro_f1,
                    "tail_recall": float(e.recall[-1]),
                    "under": e.under_allocation_rate,
                    "over": e.over_allocation_rate,
                }
                for t, e in ev.targets.items()
            },
            "fit_seconds": res.fit_seconds,
        }
    return {
        "tasks": n_tasks,
        "labelled": len(frame),
        "kinds": kinds,
        "prepare_seconds": prepared,
        "train_seconds": trained,
        "peak_rss_mb": peak_mb,
        "quality": quality,
        "split": result.split_info,
        "overrides": overrides,
    }


def run_in_subprocess(
    n_tasks: int, kinds: list[str], seed: int, overrides: list[str]
) -> dict:
    """Run :func:`one_run` in a fresh process so peak memory is its own."""
    cmd = [
        sys.executable,
        __file__,
        "--one",
        str(n_tasks),
        "--seed",
        str(seed),
        "--kinds",
        *kinds,
    ]
    for item in overrides:
        cmd += ["--set", item]
    out = subprocess.run(cmd, capture_output=True, text=True, check=True, cwd=ROOT)
    return json.loads(out.stdout.strip().splitlines()[-1])


def markdown(results: list[dict], command: str) -> str:
    lines = [
        "## Training (benchmarks/bench_training.py)",
        "",
        f"Measured {time.strftime('%Y-%m-%d')} on {platform.machine()}, "
        f"{os.cpu_count()} cores, Python {platform.python_version()}; command: "
        f"`{command}`. Simulated history generated in memory (no database), "
        "time-ordered split 70/15/15; 'train' covers features, both model kinds "
        "as listed, tail rules and evaluation; peak RSS is the whole process.",
        "",
        "| tasks | labelled | kinds | prepare s | train s | peak RSS MB |",
        "|---:|---:|---|---:|---:|---:|",
    ]
    for r in results:
        lines.append(
            f"| {r['tasks']:,} | {r['labelled']:,} | {'+'.join(r['kinds'])} | "
            f"{r['prepare_seconds']:.0f} | {r['train_seconds']:.0f} | "
            f"{r['peak_rss_mb']:.0f} |"
        )
    lines += ["", "Fit seconds per kind (four targets):", ""]
    for r in results:
        fits = ", ".join(
            f"{k} {q['fit_seconds']:.0f} s" for k, q in r["quality"].items()
        )
        lines.append(f"- {r['tasks']:,} tasks: {fits}")
    best = max(results, key=lambda r: r["tasks"] if "keras" in r["kinds"] else 0)
    lines += [
        "",
        f"Quality on the test part at {best['tasks']:,} tasks "
        f"({best['split']['test_rows']:,} test tasks, newest "
        f"{best['split']['test_period']}):",
        "",
        "| target | model | accuracy | macro-F1 | top-class recall | under | over |",
        "|---|---|---:|---:|---:|---:|---:|",
    ]
    for kind, q in best["quality"].items():
        for t, m in q["targets"].items():
            lines.append(
                f"| {t} | {kind} | {m['accuracy']:.3f} | {m['macro_f1']:.3f}"
                f" | {m['tail_recall']:.3f} | {m['under']:.3f} | "
                f"{m['over']:.3f} |"
            )
    lines += [
        "",
        "| model | mean accuracy | exact match (4/4) | >=1 | >=2 | >=3 |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for kind, q in best["quality"].items():
        a = q["at_least"]
        lines.append(
            f"| {kind} | {q['mean_accuracy']:.3f} | {q['exact_match']:.3f} "
            f"| {a.get('1', 0):.3f} | {a.get('2', 0):.3f} | "
            f"{a.get('3', 0):.3f} |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--sizes",
        type=int,
        nargs="+",
        default=[100_000],
        help="history sizes, in simulated tasks, one training run each "
        "(default: %(default)s)",
    )
    parser.add_argument(
        "--keras-max",
        type=int,
        default=1_000_000,
        help="Train Keras too up to this many tasks.",
    )
    parser.add_argument(
        "--seed",
        type=int,
        default=0,
        help="seed of the simulated history (default: %(default)s)",
    )
    parser.add_argument("--one", type=int, help=argparse.SUPPRESS)
    parser.add_argument(
        "--kinds", nargs="+", default=["xgboost"], help=argparse.SUPPRESS
    )
    parser.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="FIELD=VALUE",
        help="Override one training parameter, e.g. xgboost.learning_rate=0.1 or "
        "half_life_days=null (repeatable).",
    )
    parser.add_argument(
        "--no-write",
        action="store_true",
        help="Print only; leave docs/performance.md alone.",
    )
    args = parser.parse_args()
    if args.one:
        result = one_run(args.one, args.kinds, args.seed, args.set)
        print(json.dumps(result, default=str))
        return
    results = []
    for size in args.sizes:
        kinds = ["xgboost", "keras"] if size <= args.keras_max else ["xgboost"]
        print(
            f"training on {size:,} simulated tasks ({'+'.join(kinds)}) ...", flush=True
        )
        result = run_in_subprocess(size, kinds, args.seed, args.set)
        print(
            json.dumps(
                {k: v for k, v in result.items() if k != "quality"}, default=str
            ),
            flush=True,
        )
        for kind, q in result["quality"].items():
            f1 = " / ".join(f"{m['macro_f1']:.3f}" for m in q["targets"].values())
            print(
                f"  {kind}: mean accuracy {q['mean_accuracy']:.3f}, macro-F1 {f1}, "
                f"fit {q['fit_seconds']:.0f} s",
                flush=True,
            )
        results.append(result)
    text = markdown(results, "python " + " ".join(sys.argv))
    print(text)
    if not args.no_write:
        from perfdoc import write_section

        write_section("bench_training", text)


if __name__ == "__main__":
    main()
