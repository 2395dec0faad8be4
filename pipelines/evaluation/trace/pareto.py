"""A Pareto figure per job log: failed jobs against wasted hours, for every strategy.

For each replayed target of a benchmark's ``full.json`` (see
:func:`pipelines.evaluation.trace.benchmark.write_outputs`), a panel with one marker per
replayed strategy: its failed-job rate (x) against its wasted hours (y: core-hours
for run time, GB-hours for memory), coloured and sized by its bulk delay (hours a
task waits for its scouts), and labelled with its name. The step line joins the
non-dominated strategies (no other row fails fewer jobs and wastes fewer hours);
the oracle (every job asks for what it used) is given as a note, kept off
that front. Scouts are drawn as squares, our predictor's rows as diamonds, and the
hindsight row (the production row with the scouts kept on the tasks chosen after
they ran, :mod:`pipelines.evaluation.trace.hindsight`) as a star: a bound, kept off
the front like the oracle, but drawn, since it shows how far a better choice of
which tasks to scout would go with the values written. The
view spans the front and those rows; a row far worse is drawn hollow on its edge,
its label giving its figures. Lower left is better. Drawn with matplotlib's object
API on the Agg canvas.

    python -m pipelines.evaluation.trace.pareto BENCHMARKS/*/full.json \
        -o docs/img/pareto
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import numpy as np
from matplotlib import colormaps
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.cm import ScalarMappable
from matplotlib.colors import Normalize
from matplotlib.figure import Figure

from panda_predictor.errors import UserInputError
from pipelines.evaluation.trace.full_json import (
    figure_parser,
    log_name,
    read_full_json,
)
from pipelines.evaluation.trace.hindsight import HINDSIGHT

#: The unit of wasted hours per replayed target (others: core-h if any, else GB-h).
_UNIT = {"walltime": "core-h", "ramcount": "GB-h"}
#: Rows kept off the front: references no strategy can reach.
_REFERENCES = ("oracle",)
#: Rows drawn but kept off the front: bounds chosen after the fact.
_BOUNDS = (HINDSIGHT,)
#: Marker per kind of row, by a part of its strategy name (first match wins).
_MARKERS = (("hindsight", "*"), ("scouts", "s"), ("predictor", "D"))


def pareto_front(x: Any, y: Any) -> np.ndarray:
    """Return the indices of the non-dominated points, by ascending ``x``.

    A point is dominated when another is no worse on both coordinates and better
    on one (both are minimised); identical points are all kept.
    """
    xs = np.asarray(x, dtype=float)
    ys = np.asarray(y, dtype=float)
    if xs.shape != ys.shape or xs.ndim != 1:
        raise ValueError(
            f"The 'x' and 'y' fields must be 1-D and of one length. Got {xs.shape} "
            f"and {ys.shape} instead."
        )
    keep = [
        i
        for i in range(xs.size)
        if not np.any((xs <= xs[i]) & (ys <= ys[i]) & ((xs < xs[i]) | (ys < ys[i])))
    ]
    return np.array(sorted(keep, key=lambda i: (xs[i], ys[i])), dtype=int)


def wasted_hours(target: str, outcomes: list[dict[str, Any]]) -> tuple[str, list]:
    """Return the unit and, per outcome, the wasted hours drawn for ``target``."""
    unit = _UNIT.get(target)
    if unit is None:
        core = any(o.get("wasted_core_hours", 0.0) > 0 for o in outcomes)
        unit = "core-h" if core else "GB-h"
    field = "wasted_core_hours" if unit == "core-h" else "wasted_gb_hours"
    return unit, [float(o.get(field, 0.0)) for o in outcomes]


def strategy_front(
    names: list[str], failed: list[float], wasted: list[float]
) -> list[int]:
    """Return the indices of the non-dominated strategies, by ascending failed jobs.

    References (the oracle) and bounds (the hindsight row) are no strategy one
    can run: they are left out, so the front is what a deployment can choose from.
    """
    strategies = [
        i for i, n in enumerate(names) if n not in _REFERENCES and n not in _BOUNDS
    ]
    return [
        strategies[k]
        for k in pareto_front(
            [failed[i] for i in strategies], [wasted[i] for i in strategies]
        )
    ]


def _marker(strategy: str) -> str:
    for part, marker in _MARKERS:
        if part in strategy:
            return marker
    return "o"


def _panel(ax: Any, target: str, outcomes: list[dict[str, Any]], norm: Any) -> None:
    """Draw one target's strategies, their front and their names on ``ax``.

    Names sit in a column right of the panel, in the order of their rows' wasted
    hours, joined to their markers by thin lines: close rows stay readable.
    """
    unit, wasted = wasted_hours(target, outcomes)
    failed = [float(o["failed_job_rate"]) for o in outcomes]
    delay = [float(o.get("mean_bulk_delay_hours", 0.0)) for o in outcomes]
    names = [str(o["strategy"]) for o in outcomes]
    rows = [i for i, n in enumerate(names) if n not in _REFERENCES]
    front = strategy_front(names, failed, wasted)
    if front:
        ax.plot(
            [failed[i] for i in front],
            [wasted[i] for i in front],
            drawstyle="steps-post",
            color="tab:green",
            lw=1.5,
            alpha=0.7,
            zorder=1,
        )
    (x_lo, x_hi), (y_lo, y_hi) = _view(failed, wasted, front, rows, names)
    # Rows beyond the view are drawn hollow on its edge; their label gives them.
    shown = {
        i: (
            min(failed[i], x_hi - 0.02 * (x_hi - x_lo)),
            min(wasted[i], y_hi - 0.02 * (y_hi - y_lo)),
        )
        for i in rows
    }
    top = max(norm.vmax, 1e-9)
    for i in rows:
        marker = _marker(names[i])
        highlighted = marker != "o"
        beyond = shown[i] != (failed[i], wasted[i])
        ax.scatter(
            *shown[i],
            c=[delay[i]],
            cmap="viridis",
            norm=norm,
            s=30 + 170 * delay[i] / top + (50 if highlighted else 0),
            marker=marker,
            edgecolors="black" if highlighted or beyond else "none",
            linewidths=1.2 if highlighted or beyond else 0,
            alpha=0.35 if beyond else 1.0,
            zorder=3,
        )
    _name_column(ax, rows, names, failed, wasted, delay, shown, front, unit)
    ax.set_xlim(x_lo, x_hi)
    ax.set_ylim(y_lo, y_hi)
    for i, name in enumerate(names):
        if name in _REFERENCES:
            ax.text(
                0.02,
                0.02,
                f"{name} (off the front): {failed[i]:.3f} failed, "
                f"{wasted[i]:,.0f} {unit}",
                transform=ax.transAxes,
                fontsize=7,
                color="dimgrey",
            )
    ax.set_title(f"{target}: wasted {unit} against failed jobs", fontsize=10)
    ax.set_xlabel("failed-job rate (jobs with a failed attempt)")
    ax.set_ylabel(f"wasted {unit}")
    ax.grid(alpha=0.3)


def _name_column(
    ax: Any,
    rows: list[int],
    names: list[str],
    failed: list[float],
    wasted: list[float],
    delay: list[float],
    shown: dict[int, tuple[float, float]],
    front: list[int],
    unit: str,
) -> None:
    """Write the rows' names right of the panel, by wasted hours, linked to markers."""
    ranked = sorted(rows, key=lambda i: (-wasted[i], failed[i]))
    for rank, i in enumerate(ranked):
        text = names[i] + (f"  ({delay[i]:.2f} h)" if delay[i] > 0 else "")
        if shown[i] != (failed[i], wasted[i]):
            text += f"  [beyond: {failed[i]:.3f}, {wasted[i]:,.0f} {unit}]"
        ax.annotate(
            text,
            shown[i],
            xytext=(1.03, 1 - (rank + 0.5) / len(ranked)),
            textcoords="axes fraction",
            va="center",
            fontsize=7,
            fontweight="bold" if i in front else "normal",
            arrowprops={"arrowstyle": "-", "color": "grey", "lw": 0.5, "alpha": 0.6},
        )


def _view(
    failed: list[float],
    wasted: list[float],
    front: list[int],
    rows: list[int],
    names: list[str],
) -> tuple[tuple[float, float], tuple[float, float]]:
    """Return the x and y limits: the front and the highlighted rows, with room.

    Rows far worse than those (a rule failing most jobs) would squash the rows
    that matter into one corner; they are drawn on the edge instead.
    """
    focus = set(front) | {i for i in rows if _marker(names[i]) != "o"}
    if not focus:
        focus = set(rows)
    limits = []
    for values in (failed, wasted):
        low = min(values[i] for i in focus)
        high = max(values[i] for i in focus)
        span = high - low if high > low else max(abs(high) * 0.1, 1e-3)
        inside = [values[i] for i in rows if values[i] <= high + 0.6 * span]
        limits.append((low - 0.12 * span, max(inside, default=high) + 0.12 * span))
    return limits[0], limits[1]


def _with_hindsight(
    full: dict[str, Any], target: str, outcomes: list[dict[str, Any]]
) -> list[dict[str, Any]]:
    """Return ``target``'s replayed rows and, where the benchmark kept it, its
    hindsight row (``full["hindsight"]``; benchmarks before it have none)."""
    row = full.get("hindsight", {}).get(target)
    if not row:
        return outcomes
    return [*outcomes, {**row["outcome"], "strategy": HINDSIGHT}]


def draw_log(full: dict[str, Any], path: Path, name: str) -> Path:
    """Draw the Pareto figure of one benchmark's ``full`` (parsed full.json)."""
    replayed = {
        t: _with_hindsight(full, t, o) for t, o in full.get("replay", {}).items() if o
    }
    if not replayed:
        raise UserInputError(
            f"The benchmark of {name!r} must hold a replay (its 'replay' field). "
            "Got none instead: no target was replayed."
        )
    delays = [
        float(o.get("mean_bulk_delay_hours", 0.0))
        for outcomes in replayed.values()
        for o in outcomes
    ]
    norm = Normalize(vmin=0.0, vmax=max(max(delays), 1e-9))
    fig = Figure(figsize=(8.0 * len(replayed), 6.8))
    FigureCanvasAgg(fig)
    axes = list(fig.subplots(1, len(replayed), squeeze=False)[0])
    fig.subplots_adjust(left=0.08, right=0.97, wspace=0.8, bottom=0.2)
    for ax, (target, outcomes) in zip(axes, replayed.items(), strict=True):
        _panel(ax, target, outcomes, norm)
    colour_bar = fig.colorbar(
        ScalarMappable(norm=norm, cmap=colormaps["viridis"]),
        ax=axes,
        orientation="horizontal",
        location="bottom",
        fraction=0.04,
        pad=0.14,
        aspect=60,
    )
    colour_bar.set_label("bulk delay, h per task (marker colour and size)", fontsize=8)
    fig.suptitle(
        f"{name}: replayed strategies, lower left is better. Green steps and bold "
        "names: the non-dominated rows;\nsquares: scouts; diamonds: the predictor; "
        "star: the predictor with the scouts kept on tasks chosen afterwards (a "
        "bound, not a strategy)",
        fontsize=9,
    )
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110, bbox_inches="tight")
    return path


def main(argv: list[str] | None = None) -> int:
    """Write ``DIR/<log>.png`` for each full.json given on the command line."""
    parser = figure_parser(
        "pipelines.evaluation.trace.pareto",
        __doc__,
        "DIR",
        "folder to write one <log>.png into per log",
        "docs/img/pareto",
    )
    args = parser.parse_args(argv)
    try:
        documents = [(p, read_full_json(p)) for p in args.full_json]
        names = [log_name(doc, p) for p, doc in documents]
        twice = sorted({n for n in names if names.count(n) > 1})
        if twice:
            raise UserInputError(
                f"Each FULL_JSON must describe another log. Got {twice} more than "
                "once instead."
            )
        for (source, doc), name in zip(documents, names, strict=True):
            if not any(doc.get("replay", {}).values()):
                print(f"{source}: no replayed target, no figure", file=sys.stderr)
                continue
            print(draw_log(doc, args.out / f"{name}.png", name))
    except UserInputError as exc:
        parser.error(str(exc))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
