"""Options and hidden parameters of the simulated PanDA history.

The simulation is a stand-in for ATLAS's real PanDA database: the numbers in
``pipelines/params/simulation.yaml`` are invented, versioned with the code, and never
shown to the models, which must learn them back from the simulated job records.
Invalid options raise :class:`~panda_predictor.errors.UserInputError`: they come from
the command line or from a parameter file the user wrote.
"""

from __future__ import annotations

import numbers
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import yaml

from panda_predictor.errors import UserInputError

#: The versioned hidden parameters shipped with the package.
DEFAULT_PARAMS_FILE = (
    Path(__file__).resolve().parent.parent / "params" / "simulation.yaml"
)

#: End of the simulated period unless told otherwise (tasks are created before it).
DEFAULT_END_DATE = datetime(2026, 1, 1)


def yesterday_midnight() -> datetime:
    """Return yesterday's midnight (UTC, naive): where a history for *today* may end.

    A history ending near there puts its newly defined tasks inside the hook's
    recent-history window, so the hook predicts them. The fixed
    :data:`DEFAULT_END_DATE` keeps tests reproducible instead.
    """
    today = datetime.now(UTC).replace(
        tzinfo=None, hour=0, minute=0, second=0, microsecond=0
    )
    return today - timedelta(days=1)


def weekly_history_end(latest: datetime | None = None) -> datetime:
    """Return the newest end on or before ``latest`` a whole number of weeks away
    from :data:`DEFAULT_END_DATE` (default ``latest``: :func:`yesterday_midnight`).

    The demo's and ``simulate``'s default end. The simulation draws the same
    history for every end, moved in time (:func:`pipelines.simulation.tasks.
    layout_shift`); a whole-week move also keeps every task's creation hour and
    weekday, which are features. So the demo trains the same model, and its gate
    gives the same verdict, on every day: with yesterday's midnight as the end the
    weekday feature, and with it the model, changed daily (docs/decisions.md).
    """
    latest = latest or yesterday_midnight()
    weeks = (latest - DEFAULT_END_DATE) // timedelta(weeks=1)
    return DEFAULT_END_DATE + weeks * timedelta(weeks=1)


def _check_int(name: str, value: Any, minimum: int, what: str) -> None:
    """Raise UserInputError naming ``name`` unless ``value`` is an int >= minimum."""
    is_int = isinstance(value, numbers.Integral) and not isinstance(value, bool)
    if not is_int or value < minimum:
        raise UserInputError(
            f"The {name!r} parameter must be {what}. Got {value!r} instead."
        )


@dataclass(frozen=True)
class DriftEvent:
    """A named release that, from ``start_month`` on, needs much more memory.

    From that month on, ``share`` of the tasks of the release's framework use it; their
    memory per core is ``memory_factor`` times what the processing type needs. The
    retraining pipeline uses it to check that drift is noticed.

    Parameters
    ----------
    transhome:
        Software cache ``<Framework>-<version>``, e.g. ``Athena-25.0.99``.
    start_month:
        Month index (0 = first month of the period) from which the release is used.
    memory_factor:
        Memory multiplier of the release's tasks.
    share:
        Share of the framework's tasks that use the release from ``start_month``.
    """

    transhome: str = "Athena-25.0.99"
    start_month: int = 18
    memory_factor: float = 2.5
    share: float = 0.5

    def __post_init__(self) -> None:
        framework, sep, version = self.transhome.partition("-")
        if not sep or not framework or not version:
            raise UserInputError(
                "The 'transhome' parameter must look like '<Framework>-<version>'. "
                f"Got {self.transhome!r} instead."
            )
        _check_int("start_month", self.start_month, 0, "a non-negative integer")
        if not self.memory_factor > 0:
            raise UserInputError(
                "The 'memory_factor' parameter must be a positive number. "
                f"Got {self.memory_factor!r} instead."
            )
        if not 0 < self.share <= 1:
            raise UserInputError(
                f"The 'share' parameter must be in (0, 1]. Got {self.share!r} instead."
            )

    @property
    def framework(self) -> str:
        """Return the software framework, the part of ``transhome`` before '-'."""
        return self.transhome.partition("-")[0]

    @property
    def version(self) -> str:
        """Return the release version, the part of ``transhome`` after '-'."""
        return self.transhome.partition("-")[2]


@dataclass(frozen=True)
class SimulationConfig:
    """What to simulate: sizes, period, seed, job counts and hidden parameters.

    The same config (seed and batch size included) always gives identical frames.

    Parameters
    ----------
    n_tasks:
        Historical tasks (finished, with scout and regular jobs).
    n_defined:
        Newly defined tasks created after the history ('defined'/'ready', no jobs).
    seed:
        Seed of every random draw (>= 0).
    months:
        Length of the simulated period in calendar months.
    end_date:
        End of the period; newly defined tasks are created just after it. The
        draws do not depend on it: the history laid out to end at
        :data:`DEFAULT_END_DATE` is moved to end here.
    batch_size:
        Tasks per generated batch (memory grows with it, not with ``n_tasks``).
    scouts_min, scouts_max:
        Range of scout jobs per task (PanDA uses about 10; fewer keeps data small).
    regular_min, regular_max:
        Range of regular (non-scout) jobs per task kept in the history.
    drift_event:
        Optional release that needs much more memory from a given month on.
    params:
        Hidden parameters; default: ``pipelines/params/simulation.yaml``.
    """

    n_tasks: int = 1000
    n_defined: int = 0
    seed: int = 0
    months: int = 24
    end_date: datetime = DEFAULT_END_DATE
    batch_size: int = 10_000
    scouts_min: int = 4
    scouts_max: int = 8
    regular_min: int = 1
    regular_max: int = 4
    drift_event: DriftEvent | None = None
    params: dict[str, Any] = field(default_factory=lambda: load_params(), repr=False)

    def __post_init__(self) -> None:
        _check_int("n_tasks", self.n_tasks, 1, "a positive integer")
        _check_int("n_defined", self.n_defined, 0, "a non-negative integer")
        _check_int("seed", self.seed, 0, "a non-negative integer")
        _check_int("months", self.months, 1, "a positive integer")
        _check_int("batch_size", self.batch_size, 1, "a positive integer")
        _check_int("scouts_min", self.scouts_min, 1, "a positive integer")
        _check_int(
            "scouts_max",
            self.scouts_max,
            self.scouts_min,
            f"an integer >= scouts_min ({self.scouts_min})",
        )
        _check_int("regular_min", self.regular_min, 0, "a non-negative integer")
        _check_int(
            "regular_max",
            self.regular_max,
            self.regular_min,
            f"an integer >= regular_min ({self.regular_min})",
        )
        if not isinstance(self.end_date, datetime):
            raise UserInputError(
                "The 'end_date' parameter must be a datetime. "
                f"Got {self.end_date!r} instead."
            )
        if self.drift_event is not None and self.drift_event.start_month >= self.months:
            raise UserInputError(
                f"The 'start_month' parameter must be below months ({self.months}). "
                f"Got {self.drift_event.start_month!r} instead."
            )


def load_params(path: Path | str | None = None) -> dict[str, Any]:
    """Read the hidden simulation parameters from YAML (default: the packaged file).

    Parameters
    ----------
    path:
        YAML file with the layout of ``pipelines/params/simulation.yaml``.
    """
    path = Path(path) if path is not None else DEFAULT_PARAMS_FILE
    params = yaml.safe_load(path.read_text())
    required = (
        "processing_types",
        "noise",
        "giants",
        "releases",
        "architectures",
        "campaigns",
        "sites",
        "outcomes",
    )
    missing = [key for key in required if key not in (params or {})]
    if missing:
        raise UserInputError(
            f"The simulation parameters in {str(path)!r} must define {list(required)}. "
            f"Missing: {missing}."
        )
    return params
