"""The published job-sizing methods, as allocation strategies for the replay.

Each method sizes a job from the history of its key (user, executable, ...) that was
known strictly before the job's submission: a past job counts only if its
``known_s`` (when its use became known: its end) is earlier than this job's
``submit_s``, and only the newest ``window`` of those count. The methods, written
here from their papers' descriptions (see docs/peers.md for the readings and the
deviations a job log forces):

- ``"tovar"``: Tovar et al., "A Job Sizing Strategy for High-Throughput Scientific
  Workflows", IEEE TPDS 29(2), 2018. The first allocation minimises the expected
  waste over the empirical distribution of past peak use, where a job that exceeds
  it fails, wastes the allocation, and is retried at the largest use seen.
- ``"witt_percentile"``: Witt, Wagner and Leser, "Feedback-Based Resource
  Allocation for Batch Scheduling of Scientific Workflows", HPCS 2019: a high
  percentile (:data:`WITT_PERCENTILE`) of the past use, fed back as jobs finish.
- ``"witt_lwr"``: the same paper's low-wastage regression: a linear fit of use on a
  feature known at submission, raised by the offset with the lowest expected
  wastage, failures included.

Pure numpy, vectorised: one sort of the whole history by (key, known time) and a
search for each job's visible rows, then matrices of at most ``window`` columns
processed in blocks of jobs.
"""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["PEER_METHODS", "WITT_PERCENTILE", "WITT_RETRY_FACTOR", "peer_requests"]

#: The methods :func:`peer_requests` knows.
PEER_METHODS = ("tovar", "witt_percentile", "witt_lwr")
#: The percentile of past use that ``"witt_percentile"`` allocates.
WITT_PERCENTILE = 95.0
#: A failed Witt allocation is retried at this multiple of the first one.
WITT_RETRY_FACTOR = 2.0
#: Jobs per block of window matrices (about 1 MB each: they stay in cache).
_BLOCK = 1024


def peer_requests(
    method: str,
    key: Any,
    submit_s: Any,
    known_s: Any,
    used: Any,
    cap: Any,
    x: Any = None,
    *,
    window: int = 100,
) -> tuple[np.ndarray, np.ndarray]:
    """Return each job's (first request, retry request) under a published method.

    Rows come back in the given order. A job whose key has no visible history gets
    its ``cap``; where ``cap`` is inf (no user request) it gets NaN, meaning "no
    value": the caller falls back to its own default (e.g. the scouts' request).
    Requests never exceed ``cap``.

    Method by method (expected waste is computed without run-time weights: the
    caller gives none, and in our reading Tovar et al. treat peak use and run time
    as independent, so the expected run time is a common factor that does not move
    the minimum; docs/peers.md gives every reading and deviation):

    - ``"tovar"``: over the m visible uses u with largest M, the waste of a first
      allocation a is ``sum_{u<=a} (a-u) + sum_{u>a} (a + M - u)``, which
      simplifies to ``m*a + M*#{u>a} - sum(u)``. The candidates are the observed
      uses; on a tie the larger allocation wins (fewer failures at equal waste).
      Retry: M, the largest use seen.
    - ``"witt_percentile"``: the :data:`WITT_PERCENTILE`-th percentile of the
      visible uses (numpy's linear interpolation). Retry:
      :data:`WITT_RETRY_FACTOR` times the first request.
    - ``"witt_lwr"``: least squares ``u ~ b0 + b1*x`` over the visible rows (the
      key's mean when fewer than two rows or their ``x`` do not vary), then the
      offset o, among the residuals r = u - fit, that minimises the expected
      wastage of the allocations a = ``fit + o`` over the visible rows: a row that
      fits wastes ``a - u``; a row that does not wastes its failed allocation and
      then the doubled retry's spare, ``a + (2a - u)``. Only offsets at which every
      visible row fits at a or at 2a are candidates, so that this cost is exact
      (the largest residual always is one). The request is ``fit(x) + o``, never
      below the smallest visible use (a line can extrapolate below zero). Retry:
      :data:`WITT_RETRY_FACTOR` times the first request.

    :param method: one of :data:`PEER_METHODS`.
    :param key: (n,) the key of each job; equal values are one key (a missing
        value too: give such jobs distinct keys if they must not share history).
    :param submit_s: (n,) submission time of each job, seconds.
    :param known_s: (n,) when each job's use became known (its end), seconds;
        never before its own submission.
    :param used: (n,) what each job used (peak memory, run time), >= 0.
    :param cap: (n,) the user's request, > 0; inf where there is none.
    :param x: (n,) for ``"witt_lwr"`` only: the feature known at submission that
        use is regressed on (the requested amount, or the processors).
    :param window: how many of the newest visible jobs of a key count, >= 1.
    :raises ValueError: on an unknown method, ragged or invalid arrays.
    """
    _check_options(method, window)
    columns = _check_columns(method, key, submit_s, known_s, used, cap, x)
    code, submit, known, use, cap_v, feature = columns
    n = use.size
    if n == 0:
        return np.full(0, np.nan), np.full(0, np.nan)
    start, end = _visible_rows(code, submit, known, window)
    seen = end > start
    # Jobs submitted before any new job of their key ended share one window: each
    # distinct window is sized once.
    windows, which = np.unique(
        start[seen] * np.int64(n + 1) + end[seen], return_inverse=True
    )
    order = np.lexsort((known, code))
    sized = _size_windows(
        method,
        windows // (n + 1),
        windows % (n + 1),
        use[order],
        feature[order] if feature is not None else None,
    )
    per_window = tuple(part[which.reshape(-1)] for part in sized)
    return _job_requests(method, per_window, seen, feature, cap_v)


def _check_options(method: str, window: Any) -> None:
    """Raise what is wrong with :func:`peer_requests`' ``method`` or ``window``."""
    if method not in PEER_METHODS:
        raise ValueError(
            f"The 'method' field must be one of {PEER_METHODS}. Got {method!r} instead."
        )
    if isinstance(window, bool) or not isinstance(window, int | np.integer):
        raise ValueError(
            f"The 'window' field must be a positive integer. Got {window!r} instead."
        )
    if window < 1:
        raise ValueError(
            f"The 'window' field must be a positive integer. Got {window} instead."
        )


def _job_requests(
    method: str,
    sized: tuple[np.ndarray, ...],
    seen: np.ndarray,
    feature: np.ndarray | None,
    cap: np.ndarray,
) -> tuple[np.ndarray, np.ndarray]:
    """Return each job's (first request, retry request) from its window's sizing.

    :param sized: :func:`_size_windows`' parts, one row per job with history.
    :param seen: (n,) whether the job's key had visible history.
    :param feature: (n,) the regression's feature (``"witt_lwr"`` only).
    :param cap: (n,) the user's request (inf: none).
    """
    n = seen.size
    first = np.full(n, np.nan)
    if method == "witt_lwr":
        assert feature is not None
        intercept, slope, offset, smallest = sized
        first[seen] = np.maximum(intercept + slope * feature[seen] + offset, smallest)
    else:
        first[seen] = sized[0]
    retry = np.full(n, np.nan)
    if method == "tovar":
        # The largest visible use: the retry Tovar et al. call "max seen".
        retry[seen] = sized[1]
    else:
        retry[seen] = WITT_RETRY_FACTOR * first[seen]
    first = np.where(seen, np.minimum(first, cap), cap)
    retry = np.where(seen, np.minimum(retry, cap), cap)
    first[np.isinf(first)] = np.nan
    retry[np.isinf(retry)] = np.nan
    return first, retry


def _check_columns(
    method: str, key: Any, submit_s: Any, known_s: Any, used: Any, cap: Any, x: Any
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, Any]:
    """Return the validated columns: key codes, times, use, cap and the feature."""
    keys = np.asarray(key)
    arrays = {"submit_s": submit_s, "known_s": known_s, "used": used, "cap": cap}
    if method == "witt_lwr":
        if x is None:
            raise ValueError(
                "The 'x' field must be given for method 'witt_lwr' (the feature "
                "use is regressed on). Got None instead."
            )
        arrays["x"] = x
    out: dict[str, np.ndarray] = {}
    for name, value in arrays.items():
        try:
            out[name] = np.asarray(value, dtype=float)
        except (TypeError, ValueError):
            raise ValueError(
                f"The '{name}' field must hold numbers. Got {value!r:.60} instead."
            ) from None
    shapes = {"key": keys.shape, **{k: v.shape for k, v in out.items()}}
    if len(set(shapes.values())) != 1 or keys.ndim != 1:
        raise ValueError(
            f"The peer arrays must be 1-D and of one length. Got {shapes} instead."
        )
    for name in ("submit_s", "known_s", "used", "x"):
        if name not in out:
            continue
        bad = ~np.isfinite(out[name])
        if name == "used":
            bad |= out[name] < 0
        if bad.any():
            need = "finite numbers >= 0" if name == "used" else "finite numbers"
            raise ValueError(
                f"The '{name}' field must hold {need}. Got {out[name][bad][:3]} "
                "instead."
            )
    bad_cap = ~(out["cap"] > 0)
    if bad_cap.any():
        raise ValueError(
            "The 'cap' field must hold positive numbers (inf: no request). "
            f"Got {out['cap'][bad_cap][:3]} instead."
        )
    early = out["known_s"] < out["submit_s"]
    if early.any():
        raise ValueError(
            "The 'known_s' field must not be before 'submit_s' (a job's use is known "
            f"only after it is submitted). Got known_s {out['known_s'][early][:3]} "
            f"for submit_s {out['submit_s'][early][:3]} instead."
        )
    return (
        _key_codes(keys),
        out["submit_s"],
        out["known_s"],
        out["used"],
        out["cap"],
        out.get("x"),
    )


def _key_codes(keys: np.ndarray) -> np.ndarray:
    """Return an integer code per key (one code per distinct value)."""
    try:
        return np.unique(keys, return_inverse=True)[1].reshape(-1).astype(np.int64)
    except TypeError:
        # Values numpy cannot order (text mixed with missing values): code them by
        # first appearance instead.
        seen: dict[Any, int] = {}
        return np.fromiter(
            (seen.setdefault(k, len(seen)) for k in keys.tolist()),
            dtype=np.int64,
            count=keys.size,
        )


def _visible_rows(
    code: np.ndarray, submit: np.ndarray, known: np.ndarray, window: int
) -> tuple[np.ndarray, np.ndarray]:
    """Return, per job, the [start, end) rows of its visible window.

    Rows index the history sorted by (key, known time). Times are replaced by their
    joint ranks so that (key, time) becomes one sortable integer; a past row is
    visible when its known rank is below the job's submit rank (strictly earlier).
    """
    ranks = np.unique(np.concatenate([known, submit]), return_inverse=True)[1]
    n = code.size
    width = np.int64(ranks.max() + 2)
    history = np.sort(code * width + ranks[:n])
    end = np.searchsorted(history, code * width + ranks[n:], side="left")
    key_start = np.searchsorted(history, code * width, side="left")
    start = np.maximum(key_start, end - window)
    return start, end


def _window(
    start: np.ndarray, end: np.ndarray, values: np.ndarray, fill: float
) -> tuple[np.ndarray, np.ndarray]:
    """Return the (jobs, width) matrix of each job's window and its validity mask."""
    width = int((end - start).max()) if start.size else 0
    index = start[:, None] + np.arange(max(width, 1))[None, :]
    valid = index < end[:, None]
    matrix = np.where(valid, values[np.minimum(index, values.size - 1)], fill)
    return matrix, valid


def _size_windows(
    method: str,
    start: np.ndarray,
    end: np.ndarray,
    use_sorted: np.ndarray,
    x_sorted: np.ndarray | None,
) -> list[np.ndarray]:
    """Return what ``method`` learns from each (non-empty) window, block by block.

    Tovar: (first allocation, largest use); percentile: (allocation,); LWR:
    (intercept, slope, offset, smallest use), the request being
    ``max(intercept + slope * x + offset, smallest use)``.
    """
    parts = {"tovar": 2, "witt_percentile": 1, "witt_lwr": 4}[method]
    out = [np.empty(start.size) for _ in range(parts)]
    for lo in range(0, start.size, _BLOCK):
        rows = slice(lo, lo + _BLOCK)
        learned: tuple[np.ndarray, ...]
        if method == "witt_lwr":
            assert x_sorted is not None
            learned = _lwr(start[rows], end[rows], use_sorted, x_sorted)
        else:
            uses, _ = _window(start[rows], end[rows], use_sorted, np.inf)
            uses.sort(axis=1)
            m = (end[rows] - start[rows]).astype(float)
            if method == "tovar":
                learned = _tovar(uses, m)
            else:
                learned = (_percentile(uses, m, WITT_PERCENTILE),)
        for target, part in zip(out, learned, strict=True):
            target[rows] = part
    return out


def _tovar(uses: np.ndarray, m: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Return the waste-minimising first allocation and the largest use per row.

    Row-wise over sorted uses s_0 <= ... <= s_{m-1} (inf-padded) with M = s_{m-1},
    candidate s_j has expected waste (times m, minus the constant sum of uses)
    ``m*s_j + M*(m-1-j)``; for tied uses the last index counts the failures right,
    and the others cost more, so the minimum is the same.
    """
    j = np.arange(uses.shape[1])[None, :]
    top = uses[np.arange(uses.shape[0]), m.astype(int) - 1][:, None]
    cost = m[:, None] * uses + top * (m[:, None] - 1 - j)
    cost[j >= m[:, None]] = np.inf
    # argmin of the reversed columns: the largest allocation among equal costs.
    best = uses.shape[1] - 1 - np.argmin(cost[:, ::-1], axis=1)
    return uses[np.arange(uses.shape[0]), best], top[:, 0]


def _percentile(uses: np.ndarray, m: np.ndarray, q: float) -> np.ndarray:
    """Return the q-th percentile of each row of sorted uses, linearly interpolated."""
    position = q / 100.0 * (m - 1)
    low = np.floor(position).astype(int)
    high = np.minimum(low + 1, m.astype(int) - 1)
    rows = np.arange(uses.shape[0])
    frac = position - low
    return uses[rows, low] + frac * (uses[rows, high] - uses[rows, low])


def _lwr(
    start: np.ndarray,
    end: np.ndarray,
    use_sorted: np.ndarray,
    x_sorted: np.ndarray,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Return the low-wastage regression of each window (see :func:`_size_windows`)."""
    u, valid = _window(start, end, use_sorted, 0.0)
    xs, _ = _window(start, end, x_sorted, 0.0)
    m = (end - start).astype(float)
    x_mean = xs.sum(axis=1) / m
    u_mean = u.sum(axis=1) / m
    dx = np.where(valid, xs - x_mean[:, None], 0.0)
    sxx = np.einsum("ij,ij->i", dx, dx)
    # Padded cells hold u = 0 and dx = 0, and the dx sum to 0: no centring of u.
    sxy = np.einsum("ij,ij->i", dx, u)
    # A fit on one row, or on x that do not vary (relative to their size), is
    # degenerate: predict the key's mean.
    scale = np.maximum(np.abs(x_mean), 1.0)
    fit = (m >= 2) & (sxx > 1e-12 * m * scale * scale)
    slope = np.where(fit, sxy / np.where(fit, sxx, 1.0), 0.0)
    intercept = u_mean - slope * x_mean
    pred = intercept[:, None] + slope[:, None] * xs
    resid = np.where(valid, u - pred, np.inf)
    order = np.argsort(resid, axis=1)
    r = np.take_along_axis(resid, order, axis=1)
    p = np.take_along_axis(pred, order, axis=1)
    j = np.arange(r.shape[1])[None, :]
    inside = j < m[:, None]
    r = np.where(inside, r, 0.0)
    p[~inside] = 0.0
    # Candidate j (offset r_j) fails the rows after it; a failed row wastes its
    # allocation a and the retry's spare, which is WITT_RETRY_FACTOR * a more
    # than a fit would. The residuals of a least-squares fit sum to 0, so the
    # wastage of the fits, sum(o - r), is m * o.
    p_above = p.sum(axis=1, keepdims=True) - np.cumsum(p, axis=1)
    cost = m[:, None] * r + WITT_RETRY_FACTOR * (p_above + (m[:, None] - 1 - j) * r)
    # Below this offset some visible job would need a second doubling, which the
    # cost above does not count: such offsets are not candidates.
    one_retry = np.where(valid, u / WITT_RETRY_FACTOR - pred, -np.inf).max(axis=1)
    cost[~inside | (r < one_retry[:, None])] = np.inf
    best = r.shape[1] - 1 - np.argmin(cost[:, ::-1], axis=1)
    offset = r[np.arange(r.shape[0]), best]
    smallest = np.where(valid, u, np.inf).min(axis=1)
    return intercept, slope, offset, smallest
