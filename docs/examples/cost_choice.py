"""Print how the cost choice sized one task: every class value and the values near
the one written, with their expected cost and the chance each is too little.

The worked example of docs/decisions.md ("Sizing by expected cost") is this
script's output on the demo's home. Usage, after ``panda-predictor demo``:

    PANDA_PREDICTOR_HOME=var python docs/examples/cost_choice.py 40020017

It reads the task from the PanDA database and the labelled history as the hook
does, and runs the champion's served decision (``Predictor.classified`` and
``Predictor.decide``, what the hook writes), then shows each priced target's
candidates from ``CostChooser.priced``.
"""

from __future__ import annotations

import argparse
import os

import numpy as np

os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")

from panda_predictor.db.engine import make_engine  # noqa: E402
from panda_predictor.db.reader import read_task_features  # noqa: E402
from panda_predictor.serving.classified import served_distribution  # noqa: E402
from panda_predictor.serving.loader import load_champion  # noqa: E402
from panda_predictor.serving.recent import IncrementalHistory  # noqa: E402
from panda_predictor.settings import load_settings  # noqa: E402

#: Candidates shown on each side of the one written.
NEIGHBOURS = 2


def main() -> None:
    """Print the cost choice of one task (see the module doc)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("task_id", type=int, help="JEDITASKID of a task to size")
    args = parser.parse_args()
    settings = load_settings()
    engine = make_engine(settings)
    predictor = load_champion(settings)
    tasks = read_task_features(engine, settings, [args.task_id])
    if tasks.empty:
        raise SystemExit(f"No task {args.task_id} in {settings.database_url()}.")
    history = IncrementalHistory(engine, settings).frame()
    parts = predictor.classified(tasks, history)
    decided = predictor.decide(parts, predictor.in_domain(tasks))
    distribution = served_distribution(parts)
    decision, kind = decided["decision"][0], decided["reason_kind"][0]
    print(f"task {args.task_id}: {decision} ({kind})")
    for t, chooser in predictor.policy.choosers.items():
        if chooser.kind is None:
            continue
        bins = predictor.bundle.bins[t]
        p = distribution[t][:1]
        expected, p_short, _ = chooser.priced(p)
        written = float(decided[f"{t}_value"][0])
        best = int(np.argmin(np.abs(chooser.candidates - written)))
        near = range(
            max(best - NEIGHBOURS, 0),
            min(best + NEIGHBOURS + 1, chooser.candidates.size),
        )
        classes = {int(np.searchsorted(chooser.candidates, v)) for v in bins.values}
        how = (
            "writes its scouts' value"
            if chooser.writes_scouts_value
            else f"delay price {chooser.settings.delay_price:g}"
        )
        print(
            f"\n{t} ({bins.unit}), {how}; class probabilities "
            + ", ".join(f"{q:.3f}" for q in p[0])
        )
        for j in sorted(classes | set(near)):
            mark = "  <- written" if j == best else ""
            print(
                f"  {chooser.candidates[j]:10.0f}  expected cost "
                f"{expected[0, j]:9.3f} job runs  P(too little) "
                f"{p_short[0, j]:.3f}{mark}"
            )
    print(
        f"\nall targets: expected cost {decided['total_cost'][0]:.3f} job runs; "
        f"with scouts {decided['scouts_cost'][0]:.3f}"
    )


if __name__ == "__main__":
    main()
