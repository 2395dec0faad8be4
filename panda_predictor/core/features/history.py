"""Recent history of similar tasks: what past tasks of the same kind measured.

A task's strongest predictor is what the scouts of similar earlier tasks measured. For
each *key group* (tasks sharing a transformation and release, a processing type and
software framework, a user, or a user's transformation) and each target we keep
running statistics: the last known value, the mean of the last two, ``log1p`` of how
many values were seen, the 75th and 95th percentile of the last :data:`WINDOW`
values, and the largest used/requested ratio of the last :data:`RATIO_TASKS` (where
the requester's value is known). These are also the field's recency rules
(:mod:`panda_predictor.core.decide.experts` turns them into experts).

Leakage rule: a past task contributes only once its labels are known, i.e. a history
row counts for a task iff ``labels_known_at < as_of`` (strictly). For training the as-of
time of a task is its ``creationdate``; for serving it is "now". Both paths below share
the same key and statistic code so they give identical features for the same as-of
time:

* :func:`history_features_at_creation` (training) and :class:`HistoryStatistics`
  (the same, its running statistics built once for several lookups): vectorised
  per-group running statistics joined with
  ``pandas.merge_asof(..., allow_exact_matches=False)``.
* :class:`RecentHistoryIndex` (serving): the latest statistics per key in dicts, so one
  task costs one dict lookup per group.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd
from pandas.api.indexers import BaseIndexer

from panda_predictor.core.domain.targets import TARGET_NAMES

#: Key groups: name -> the columns whose values must all match. ``framework`` is the
#: prefix of TRANSHOME before the first '-' (not JEDI_TASKS.FRAMEWORK, which names the
#: submission system).
HISTORY_GROUPS: dict[str, tuple[str, ...]] = {
    "trf_release": ("transpath", "transhome"),
    "proctype_framework": ("processingtype", "framework"),
    "user": ("username",),
    "user_transformation": ("username", "transpath"),
}
#: The statistics kept per key group and target, in feature order.
HISTORY_STATS: tuple[str, ...] = (
    "last",
    "mean2",
    "log1p_count",
    "p75",
    "p95",
    "max_ratio5",
)
#: Past values of one key the percentiles use (a bounded, recent window, as the
#: Kubernetes recommender keeps a bounded recent histogram).
WINDOW = 50
#: Past tasks of one key the largest used/requested ratio looks at.
RATIO_TASKS = 5
#: History column holding the requester's value of ``target`` (NaN: none given).
REQUEST_PREFIX = "requested_"

#: Separator of the parts of a composite key; never found in PanDA names.
_KEY_SEP = "\x1f"


def text(series: pd.Series) -> pd.Series:
    """Return ``series`` as stripped strings, with NULL and blank values as NaN."""
    out = series.astype(str).str.strip()
    return out.where(series.notna() & (out != ""))


def is_null(value: Any) -> bool:
    """Return True for None, NaN, NaT and pd.NA (a NULL cell), False otherwise."""
    if value is None:
        return True
    if isinstance(value, str | int):
        return False
    if isinstance(value, float):  # pd.isna's answer, without its dispatch
        return value != value
    try:
        return bool(pd.isna(value))
    except (TypeError, ValueError):  # list-likes are values, not NULLs
        return False


def text_value(value: Any) -> str | None:
    """Return one value as :func:`text` would: stripped string, or None for NULL."""
    if is_null(value):
        return None
    out = str(value).strip()
    return out or None


def split_transhome_value(value: Any) -> tuple[str | None, str | None]:
    """Return (framework, release) of one TRANSHOME as :func:`split_transhome` does."""
    whole = text_value(value)
    if whole is None:
        return None, None
    framework, _, release = whole.partition("-")
    return text_value(framework), text_value(release)


def split_transhome(transhome: pd.Series) -> tuple[pd.Series, pd.Series]:
    """Split TRANSHOME (``AthGeneration-24.0.1``) into framework and release.

    A value without '-' is all framework and has no (NaN) release.
    """
    # Few distinct values in millions of rows: split each distinct value once.
    codes, uniques = pd.factorize(text(transhome))
    halves = [str(u).partition("-") for u in uniques]
    parts = []
    for pick in (0, 2):
        table = np.array([h[pick] for h in halves] + [None], dtype=object)
        parts.append(text(pd.Series(table[codes], index=transhome.index)))
    return parts[0], parts[1]


def history_feature_names(
    groups: Iterable[str] = tuple(HISTORY_GROUPS), targets: Iterable[str] = TARGET_NAMES
) -> list[str]:
    """Return the history feature names, ``hist_<group>_<target>_<stat>``, in order."""
    targets = tuple(targets)
    return [f"hist_{g}_{t}_{s}" for g in groups for t in targets for s in HISTORY_STATS]


def group_key(frame: pd.DataFrame, columns: Sequence[str]) -> pd.Series:
    """Return one string key per row for ``columns``; NaN if any part is NULL."""
    key: pd.Series | None = None
    for column in columns:
        if column == "framework":
            part = split_transhome(frame["transhome"])[0]
        else:
            part = text(frame[column])
        key = part if key is None else key + _KEY_SEP + part
    assert key is not None
    return key


def record_key(task: Mapping[str, Any], columns: Sequence[str]) -> str | None:
    """Return :func:`group_key` of one task given as a map; None if a part is NULL."""
    parts = []
    for column in columns:
        if column == "framework":
            part = split_transhome_value(task.get("transhome"))[0]
        else:
            part = text_value(task.get(column))
        if part is None:
            return None
        parts.append(part)
    return _KEY_SEP.join(parts)


def required_columns(groups: Iterable[str]) -> set[str]:
    """Return the raw input columns the key ``groups`` are built from."""
    unknown = sorted(set(groups) - set(HISTORY_GROUPS))
    if unknown:
        raise ValueError(
            f"The 'groups' must be among {list(HISTORY_GROUPS)}. Got {unknown} instead."
        )
    cols = {c for g in groups for c in HISTORY_GROUPS[g]}
    if "framework" in cols:
        cols = (cols - {"framework"}) | {"transhome"}
    return cols


def to_naive_ns(values: Any, field: str) -> pd.Series:
    """Return ``values`` as naive UTC ``datetime64[ns]``; raise if not date-like."""
    try:
        with warnings.catch_warnings():
            # Text dates make pandas warn about guessing a format; the dates are
            # parsed all the same, and unparseable ones raise below.
            warnings.simplefilter("ignore", UserWarning)
            out = pd.to_datetime(pd.Series(values))
    except (TypeError, ValueError) as exc:
        raise ValueError(
            f"The '{field}' field must hold dates or datetimes. Got {exc} instead."
        ) from None
    if isinstance(out.dtype, pd.DatetimeTZDtype):
        out = out.dt.tz_convert("UTC").dt.tz_localize(None)
    return out.astype("datetime64[ns]")


def _check_columns(frame: Any, name: str, required: Iterable[str]) -> None:
    if not isinstance(frame, pd.DataFrame):
        raise TypeError(
            f"The '{name}' frame must be a pandas DataFrame. "
            f"Got {type(frame).__name__} instead."
        )
    missing = sorted(set(required) - set(frame.columns))
    if missing:
        raise ValueError(
            f"The '{name}' frame must have the columns {sorted(required)}. "
            f"Got one without {missing} instead."
        )


def _sorted_history(
    history: pd.DataFrame, groups: Iterable[str], targets: Iterable[str]
) -> pd.DataFrame:
    """Validate ``history`` and return the columns used, in the order labels came."""
    keys = required_columns(groups)
    _check_columns(history, "history", keys | {"labels_known_at"})
    targets = tuple(targets)
    extra = ["jeditaskid", *targets, *(REQUEST_PREFIX + t for t in targets)]
    out = history[sorted(keys) + [c for c in extra if c in history.columns]].copy()
    out["_known_at"] = to_naive_ns(history["labels_known_at"], "labels_known_at").values
    # A row that does not say when its labels became known can never be "before".
    out = out[out["_known_at"].notna()]
    order = ["_known_at"] + (["jeditaskid"] if "jeditaskid" in out.columns else [])
    return out.sort_values(order, kind="stable").reset_index(drop=True)


def _target_values(history: pd.DataFrame, target: str) -> np.ndarray:
    values = pd.to_numeric(history[target]).to_numpy(dtype=np.float64, na_value=np.nan)
    return np.where(np.isfinite(values), values, np.nan)


def _request_values(history: pd.DataFrame, target: str) -> np.ndarray:
    column = REQUEST_PREFIX + target
    if column not in history.columns:
        return np.full(len(history), np.nan)
    values = _target_values(history, column)
    return np.where(values > 0, values, np.nan)


class _LastRowsOfGroup(BaseIndexer):
    """Windows over the last ``window_size`` rows of each row's group, itself included.

    Rows must come grouped (each group's rows together, in time order);
    ``group_start`` is, per row, the position of its group's first row.
    ``groupby(...).rolling(n)`` builds the same bounds group by group in Python, which
    took half of a benchmark on a log of 520,000 jobs and 98,000 keys; built here
    for all rows at once, they go to the same rolling kernels, so each statistic
    keeps its bits (``tests/core/features/test_history_rolling.py``).
    """

    group_start: np.ndarray
    window_size: int

    def get_window_bounds(
        self,
        num_values: int = 0,
        min_periods: int | None = None,
        center: bool | None = None,
        closed: str | None = None,
        step: int | None = None,
    ) -> tuple[np.ndarray, np.ndarray]:
        end = np.arange(1, num_values + 1, dtype=np.int64)
        start = np.maximum(self.group_start, end - self.window_size)
        return start, end


def _rolling(
    values: np.ndarray, group_start: np.ndarray, how: str, window: int
) -> np.ndarray:
    """Return a per-group rolling statistic of grouped ``values`` (NaN: skipped)."""
    windows = _LastRowsOfGroup(window_size=window, group_start=group_start)
    rolling = pd.Series(values).rolling(windows, min_periods=1)
    if how == "max":
        return rolling.max().to_numpy()
    return rolling.quantile(float(how), interpolation="linear").to_numpy()


def _running_stats(
    codes: np.ndarray,
    known_at: np.ndarray,
    values: np.ndarray,
    requests: np.ndarray | None = None,
) -> pd.DataFrame:
    """Return, after each known value, its group's :data:`HISTORY_STATS`.

    Rows must come in ``known_at`` order; rows without key or value are skipped.
    ``requests`` are the requester's values of the same rows (NaN: none), for the
    used/requested ratio.
    """
    keep = (codes >= 0) & ~np.isnan(values)
    requests = np.full(values.size, np.nan) if requests is None else requests
    frame = pd.DataFrame(
        {
            "code": codes[keep],
            "_known_at": known_at[keep],
            "last": values[keep],
            "_ratio": values[keep] / requests[keep],
        }
    )
    grouped = frame.groupby("code", sort=False)
    count = grouped.cumcount().to_numpy() + 1
    previous = grouped["last"].shift(1).to_numpy()
    last = frame["last"].to_numpy()
    frame["mean2"] = np.where(np.isnan(previous), last, (last + previous) / 2.0)
    frame["log1p_count"] = np.log1p(count.astype(np.float64))
    # Each key's rows together, in time order; a row's group starts count - 1 back.
    order = np.argsort(frame["code"].to_numpy(), kind="stable")
    group_start = np.arange(order.size) - (count[order] - 1)
    for column, source, how, window in (
        ("p75", last, "0.75", WINDOW),
        ("p95", last, "0.95", WINDOW),
        ("max_ratio5", frame["_ratio"].to_numpy(), "max", RATIO_TASKS),
    ):
        out = np.empty(order.size)
        out[order] = _rolling(source[order], group_start, how, window)
        frame[column] = out
    return frame.drop(columns="_ratio")


def latest_before(
    codes: np.ndarray,
    times: np.ndarray,
    running: pd.DataFrame,
    columns: Sequence[str],
    found_by: str,
) -> tuple[np.ndarray, np.ndarray]:
    """Return, per query, the last ``running`` row of its key strictly before it.

    The leakage rule in one place: ``codes`` and ``times`` are the queries' key
    codes (-1: none) and as-of times (NaT: none); ``running`` holds ``code``,
    ``_known_at`` (in time order) and the ``columns``; ``found_by`` is a column
    that is never NaN on a row. Returns the positions of the queries that found a
    row, and those rows' ``columns``.
    """
    valid = (codes >= 0) & ~np.isnat(times)
    left = pd.DataFrame(
        {"pos": np.flatnonzero(valid), "code": codes[valid], "_known_at": times[valid]}
    ).sort_values("_known_at", kind="stable")
    merged = pd.merge_asof(
        left,
        running,
        on="_known_at",
        by="code",
        allow_exact_matches=False,
        direction="backward",
    )
    found = merged[found_by].notna().to_numpy()
    rows = merged["pos"].to_numpy()[found]
    return rows, merged.loc[found, list(columns)].to_numpy()


def history_features_at_creation(
    tasks: pd.DataFrame,
    history: pd.DataFrame,
    groups: Sequence[str] = tuple(HISTORY_GROUPS),
    targets: Sequence[str] = TARGET_NAMES,
) -> pd.DataFrame:
    """Compute each task's history features as of its own ``creationdate`` (training).

    Parameters: ``tasks`` needs ``creationdate`` and the key columns; ``history`` the
    key columns, ``labels_known_at`` and any of the target columns (an absent target
    gives NaN features). A task without ``creationdate`` gets NaN features.
    One lookup: each running table is dropped once read (``keep=False``).
    """
    return HistoryStatistics(history, groups, targets, keep=False).at_creation(tasks)


class HistoryStatistics:
    """The running statistics of one labelled history, ready for as-of lookups.

    Sorting the history and running the rolling kernels over it is most of what
    :func:`history_features_at_creation` costs (0.8 of 0.85 s for 400 tasks over
    60,000 synthetic history rows, 2 cores); looking tasks up in the result is
    the rest. A served history is asked twice with the same frame (a day's
    tasks, and the experts' record tasks within the same window), so
    :meth:`~panda_predictor.serving.combination.ServingHistory.statistics` keeps
    this and both lookups read the same tables, with the same bits as two
    separate builds (``tests/core/features/test_history_statistics.py``).

    Each running table (one per key group and target present, 64 bytes per
    history row that has the key and the value) is built on its first lookup.
    With ``keep=True`` it is kept: about 1 KB per row with four groups and four
    targets (61 MB for 60,000 rows), for as long as this object lives (the
    served history, for a hook pass). With ``keep=False`` (a single lookup, as in
    training on millions of tasks) it is dropped once read, as the training path
    always did.
    """

    def __init__(
        self,
        history: pd.DataFrame,
        groups: Sequence[str] = tuple(HISTORY_GROUPS),
        targets: Sequence[str] = TARGET_NAMES,
        keep: bool = True,
    ) -> None:
        self.groups = tuple(groups)
        self.targets = tuple(targets)
        self.keep = keep
        self._hist = _sorted_history(history, self.groups, self.targets)
        #: Per group, the history rows' key codes and its keys in order of first
        #: appearance (a key's code is its position).
        self._codes: dict[str, np.ndarray] = {}
        self._keys: dict[str, pd.Index] = {}
        for group in self.groups:
            codes, keys = pd.factorize(group_key(self._hist, HISTORY_GROUPS[group]))
            self._codes[group], self._keys[group] = codes, pd.Index(keys)
        #: Per (group, target), the running table, once built (``keep=True``).
        self._tables: dict[tuple[str, str], pd.DataFrame] = {}

    @property
    def feature_names(self) -> list[str]:
        """Return the names of the features :meth:`at_creation` returns, in order."""
        return history_feature_names(self.groups, self.targets)

    def _table(self, group: str, target: str) -> pd.DataFrame | None:
        """Return the running table of ``(group, target)`` (None: no such target)."""
        if target not in self._hist.columns:
            return None
        table = self._tables.get((group, target))
        if table is None:
            table = _running_stats(
                self._codes[group],
                self._hist["_known_at"].to_numpy(),
                _target_values(self._hist, target),
                _request_values(self._hist, target),
            )
            if self.keep:
                self._tables[group, target] = table
        return table

    def at_creation(self, tasks: pd.DataFrame) -> pd.DataFrame:
        """Return each task's history features as of its own ``creationdate``.

        A key the history never saw gets code -1, which no lookup matches: the
        same features as a key of its own (a count of 0, the rest NaN).
        """
        _check_columns(tasks, "tasks", required_columns(self.groups) | {"creationdate"})
        n = len(tasks)
        created = to_naive_ns(tasks["creationdate"], "creationdate").to_numpy()
        has_time = ~np.isnat(created)
        out: dict[str, np.ndarray] = {}
        for group in self.groups:
            task_key = group_key(tasks, HISTORY_GROUPS[group]).to_numpy(object)
            task_codes = self._keys[group].get_indexer(task_key)
            for target in self.targets:
                block = np.full((n, len(HISTORY_STATS)), np.nan)
                running = self._table(group, target)
                if running is not None:
                    block[has_time, 2] = 0.0  # nothing seen yet, unless found below
                    rows, values = latest_before(
                        task_codes, created, running, HISTORY_STATS, "log1p_count"
                    )
                    block[rows] = values
                for i, stat in enumerate(HISTORY_STATS):
                    out[f"hist_{group}_{target}_{stat}"] = block[:, i]
        return pd.DataFrame(out, index=tasks.index)


class RecentHistoryIndex:
    """Latest per-key history statistics as of one time, for O(1) serving lookups.

    Build it with :meth:`from_frame`; :meth:`features` then gives exactly what
    :func:`history_features_at_creation` gives for tasks created at ``as_of``.
    """

    def __init__(
        self,
        tables: Mapping[str, Mapping[str, np.ndarray]],
        defaults: np.ndarray,
        as_of: pd.Timestamp | None,
        groups: Sequence[str],
        targets: Sequence[str],
    ) -> None:
        self._tables = tables
        self._defaults = defaults
        self._matrices: dict[str, tuple[dict[str, int], np.ndarray]] = {}
        self.as_of = as_of
        self.groups = tuple(groups)
        self.targets = tuple(targets)

    @property
    def feature_names(self) -> list[str]:
        """Return the names of the features :meth:`features` returns, in order."""
        return history_feature_names(self.groups, self.targets)

    @classmethod
    def from_frame(
        cls,
        history: pd.DataFrame,
        as_of: Any = None,
        groups: Sequence[str] = tuple(HISTORY_GROUPS),
        targets: Sequence[str] = TARGET_NAMES,
    ) -> RecentHistoryIndex:
        """Index the ``history`` rows whose labels were known strictly before ``as_of``.

        Parameters: ``history`` is the labelled history frame; ``as_of`` a date-like
        (None = every row with a ``labels_known_at``); ``groups`` and ``targets`` as in
        :func:`history_features_at_creation`.
        """
        hist = _sorted_history(history, groups, targets)
        cutoff = None
        if as_of is not None:
            cutoff = to_naive_ns([as_of], "as_of").iloc[0]
            hist = hist[hist["_known_at"] < cutoff].reset_index(drop=True)
        n_stats = len(HISTORY_STATS)
        # Absent targets stay NaN; present ones say "seen 0 times" for unknown keys.
        defaults = np.full(len(targets) * n_stats, np.nan)
        present = [t in hist.columns for t in targets]
        for ti, is_present in enumerate(present):
            if is_present:
                defaults[ti * n_stats + 2] = 0.0
        known_at = hist["_known_at"].to_numpy()
        tables: dict[str, dict[str, np.ndarray]] = {}
        for group in groups:
            codes, uniques = pd.factorize(group_key(hist, HISTORY_GROUPS[group]))
            block = np.tile(defaults, (len(uniques), 1))
            for ti, target in enumerate(targets):
                if not present[ti]:
                    continue
                stats = _running_stats(
                    codes,
                    known_at,
                    _target_values(hist, target),
                    _request_values(hist, target),
                )
                latest = stats.drop_duplicates("code", keep="last")
                cols = slice(ti * n_stats, (ti + 1) * n_stats)
                block[latest["code"].to_numpy(), cols] = latest[
                    list(HISTORY_STATS)
                ].to_numpy()
            tables[group] = dict(zip(uniques, block, strict=True))
        return cls(tables, defaults, cutoff, groups, targets)

    def features(self, tasks: pd.DataFrame) -> pd.DataFrame:
        """Return the history features of ``tasks`` (index aligned) as of ``as_of``."""
        _check_columns(tasks, "tasks", required_columns(self.groups))
        blocks = []
        for group in self.groups:
            position, matrix = self._matrix(group)
            default = len(matrix) - 1
            keys = group_key(tasks, HISTORY_GROUPS[group]).tolist()
            rows = np.fromiter(
                (
                    position.get(k, default) if isinstance(k, str) else default
                    for k in keys
                ),
                dtype=np.intp,
                count=len(keys),
            )
            blocks.append(matrix[rows])
        values = np.hstack(blocks) if blocks else np.empty((len(tasks), 0))
        # The array is new: the frame takes it as it is instead of a copy.
        return pd.DataFrame(
            values, index=tasks.index, columns=self.feature_names, copy=False
        )

    def _matrix(self, group: str) -> tuple[dict[str, int], np.ndarray]:
        """Return one group's keys' row numbers and its rows as one matrix, the
        defaults last: a batch then takes its rows with one fancy index instead
        of stacking one small array per task (made once per index)."""
        made = self._matrices.get(group)
        if made is None:
            table = self._tables[group]
            position = {key: i for i, key in enumerate(table)}
            matrix = np.vstack([*table.values(), self._defaults])
            made = self._matrices[group] = (position, matrix)
        return made

    def lookup(self, task: Mapping[str, Any]) -> dict[str, float]:
        """Return the history features of one task given as a column -> value map."""
        row = self.lookup_rows([task])[0]
        return {k: float(v) for k, v in zip(self.feature_names, row, strict=True)}

    def lookup_rows(self, tasks: Sequence[Mapping[str, Any]]) -> np.ndarray:
        """Return the history features of ``tasks`` (column -> value maps) as rows.

        The serving fast path: plain dict lookups, no DataFrame, and the same values
        as :meth:`features` gives for the same tasks (a missing key counts as NULL).
        The columns follow :attr:`feature_names`.
        """
        width = len(self._defaults)
        out = np.empty((len(tasks), width * len(self.groups)), dtype=np.float64)
        for g, group in enumerate(self.groups):
            table = self._tables[group]
            columns = HISTORY_GROUPS[group]
            for i, task in enumerate(tasks):
                key = record_key(task, columns)
                row = self._defaults if key is None else table.get(key, self._defaults)
                out[i, g * width : (g + 1) * width] = row
        return out
