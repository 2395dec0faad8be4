"""Measure how far recent tasks and recent outcomes have moved from a model's training.

Pure functions (no database, no files): a *reference profile* summarises the task
features a model was built on (quantile bins of numerics, category shares) and the
distribution of the classes it predicted on its test data; :func:`feature_drift`
scores recent tasks against it with the population stability index (PSI) and the
share of categories never seen, and :func:`class_drift` does the same for predicted
classes. The outcomes' side and the verdict over both are
:mod:`panda_predictor.core.assess.drift_verdict`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from panda_predictor.core.features.history import split_transhome

#: Categorical task columns profiled (``framework`` is derived from ``transhome``).
CATEGORICAL = (
    "processingtype",
    "prodsourcelabel",
    "framework",
    "transhome",
    "transpath",
    "architecture",
    "campaign",
    "workinggroup",
)
#: Numeric task columns profiled.
NUMERIC = ("corecount", "n_input_datasets", "nfiles_sum", "nevents_sum")
#: Features whose PSI can raise the alarm (the others are reported only). The
#: release (``transhome``) is left out on purpose: releases turn over every few
#: months, so its PSI is high in any month; a release never seen is the signal.
IMPORTANT_FEATURES = (
    "processingtype",
    "framework",
    "transpath",
    "corecount",
    "nevents_sum",
)
#: Categorical features whose share of never-seen values can raise the alarm.
UNSEEN_FEATURES = ("processingtype", "framework", "transhome", "transpath")
#: Bucket of values missing in a numeric column / NULL categories.
MISSING = "__missing__"
#: Bucket of categories outside the stored vocabulary.
OTHER = "__other__"
PROFILE_FORMAT = 1
_EPS = 1e-4


@dataclass(frozen=True)
class DriftThresholds:
    """When drift counts as detected.

    Parameters
    ----------
    psi:
        PSI above which an important feature (or a target's predicted classes) drifted;
        0.2 is the customary "significant shift".
    unseen_share:
        Share of recent tasks with a category never seen in training above which an
        important categorical feature drifted.
    under_allocation_factor:
        Feedback under-allocation above this multiple of the test rate is drift.
    accuracy_drop:
        Feedback accuracy below the test accuracy by more than this is drift.
    min_tasks:
        Fewer recent tasks (or scored outcomes) than this give no verdict.
    """

    psi: float = 0.2
    unseen_share: float = 0.10
    under_allocation_factor: float = 2.0
    accuracy_drop: float = 0.15
    min_tasks: int = 50

    def __post_init__(self) -> None:
        for name in ("psi", "unseen_share", "under_allocation_factor", "accuracy_drop"):
            value = getattr(self, name)
            if not isinstance(value, int | float) or not value > 0:
                raise ValueError(
                    f"The '{name}' field must be a positive number. Got {value!r} "
                    "instead."
                )
        if not isinstance(self.min_tasks, int) or self.min_tasks < 1:
            raise ValueError(
                f"The 'min_tasks' field must be a positive integer. Got "
                f"{self.min_tasks!r} instead."
            )


def profile_columns(tasks: pd.DataFrame) -> pd.DataFrame:
    """Return the profiled columns of a tasks frame (adds ``framework``)."""
    missing = [c for c in ("transhome", *NUMERIC) if c not in tasks.columns]
    if missing:
        raise ValueError(
            f"The tasks frame must have the columns {sorted(('transhome', *NUMERIC))}. "
            f"Got none for {missing} instead."
        )
    frameworks, _ = split_transhome(tasks["transhome"])
    out = pd.DataFrame(index=tasks.index)
    for name in CATEGORICAL:
        source = frameworks if name == "framework" else tasks.get(name)
        if source is None:
            source = pd.Series(None, index=tasks.index, dtype=object)
        out[name] = source.astype(object).where(source.notna(), MISSING).astype(str)
    for name in NUMERIC:
        out[name] = pd.to_numeric(tasks[name], errors="coerce").astype(float)
    return out


def psi(reference: Sequence[float], current: Sequence[float]) -> float:
    """Return the population stability index of two share vectors over the same bins.

    ``sum((c - r) * ln(c / r))``; empty bins get a tiny share so it stays finite.
    """
    r = np.clip(np.asarray(reference, dtype=float), _EPS, None)
    c = np.clip(np.asarray(current, dtype=float), _EPS, None)
    if r.shape != c.shape:
        raise ValueError(
            f"The share vectors must have the same length. Got {r.size} and {c.size} "
            "instead."
        )
    r, c = r / r.sum(), c / c.sum()
    return float(np.sum((c - r) * np.log(c / r)))


def expected_psi(bins: int, n_current: int, n_reference: int) -> float:
    """Return the PSI expected from sampling noise alone over ``bins`` occupied bins.

    PSI is a symmetrised chi-square divergence, so with no change it averages about
    ``(bins - 1) * (1/n_current + 1/n_reference)``.
    """
    if bins < 2 or n_current < 1:
        return 0.0
    return (bins - 1) * (1.0 / n_current + (1.0 / n_reference if n_reference else 0.0))


def _numeric_profile(values: np.ndarray, n_bins: int) -> dict[str, Any]:
    finite = values[np.isfinite(values)]
    if finite.size:
        edges = np.unique(np.quantile(finite, np.linspace(0, 1, n_bins + 1)[1:-1]))
    else:
        edges = np.array([])
    return {
        "kind": "numeric",
        "edges": edges.tolist(),
        "shares": _numeric_shares(values, edges).tolist(),
    }


def _numeric_shares(values: np.ndarray, edges: np.ndarray) -> np.ndarray:
    """Shares per bin (``len(edges) + 1`` bins, right-closed) plus a missing bin."""
    finite = np.isfinite(values)
    counts = np.bincount(
        np.searchsorted(edges, values[finite], side="left"), minlength=len(edges) + 1
    ).astype(float)
    counts = np.append(counts, float((~finite).sum()))
    return counts / max(counts.sum(), 1.0)


def _categorical_profile(values: pd.Series, max_categories: int) -> dict[str, Any]:
    shares = values.value_counts(normalize=True)
    top = shares.iloc[:max_categories]
    return {
        "kind": "categorical",
        "categories": [str(k) for k in top.index],
        "shares": [float(v) for v in top.to_numpy()],
        "other_share": float(max(0.0, 1.0 - top.sum())),
        "complete": bool(len(shares) <= max_categories),
    }


def class_shares(classes: np.ndarray, n_classes: int) -> list[float]:
    """Return the share of each class (0..n_classes-1) among known classes."""
    known = np.asarray(classes)[np.asarray(classes) >= 0].astype(int)
    counts = np.bincount(known, minlength=n_classes)[:n_classes].astype(float)
    return (counts / max(counts.sum(), 1.0)).tolist()


def build_profile(
    tasks: pd.DataFrame,
    predicted: Mapping[str, np.ndarray] | None = None,
    n_classes: Mapping[str, int] | None = None,
    n_bins: int = 10,
    max_categories: int = 2000,
) -> dict[str, Any]:
    """Return the reference profile (JSON-ready) of the tasks a model was built on.

    Parameters
    ----------
    tasks:
        Task rows (JEDI_TASKS columns plus input counts) of the training data.
    predicted, n_classes:
        Classes the model chose per target on its test tasks, and class counts.
    n_bins:
        Quantile bins of each numeric column.
    max_categories:
        Most frequent categories kept per column; rarer ones fold into ``__other__``.
    """
    columns = profile_columns(tasks)
    features: dict[str, Any] = {}
    for name in CATEGORICAL:
        features[name] = _categorical_profile(columns[name], max_categories)
    for name in NUMERIC:
        features[name] = _numeric_profile(columns[name].to_numpy(), n_bins)
    classes = {
        t: class_shares(
            np.asarray(p), int((n_classes or {}).get(t, int(np.max(p)) + 1))
        )
        for t, p in (predicted or {}).items()
    }
    return {
        "format": PROFILE_FORMAT,
        "n_tasks": int(len(tasks)),
        "features": features,
        "predicted_classes": classes,
    }


@dataclass(frozen=True)
class FeatureDrift:
    """Drift of one feature: PSI against its threshold, unseen share, the alarm.

    ``expected_psi`` is what PSI reaches by sampling noise alone when nothing
    changed, about ``(k - 1) * (1/n + 1/N)`` for ``k`` occupied bins and ``n`` recent
    and ``N`` reference tasks. ``threshold`` is the PSI above which the feature
    counts as shifted: the configured PSI threshold plus that noise, so a small
    window of a few hundred tasks does not cry wolf. Only a feature that can alarm
    (``psi_alarm`` for its PSI, ``unseen_alarm`` for its never-seen share) makes the
    verdict ``drift``; the others are reported, so a PSI above its threshold on a
    report-only feature is shown as such, never under a contradicting verdict.
    """

    feature: str
    psi: float
    unseen_share: float
    important: bool
    drifted: bool
    expected_psi: float = 0.0
    threshold: float = 0.0
    psi_alarm: bool = False
    unseen_threshold: float = 0.0
    unseen_alarm: bool = False

    @property
    def can_alarm(self) -> bool:
        """Return whether this feature can raise the drift alarm at all."""
        return self.psi_alarm or self.unseen_alarm

    @property
    def psi_shifted(self) -> bool:
        """Return whether the PSI is above its threshold (alarm or not)."""
        return self.psi > self.threshold


def _categorical_shares(values: pd.Series, profile: Mapping[str, Any]) -> tuple:
    cats = list(profile["categories"])
    index = {c: i for i, c in enumerate(cats)}
    codes = values.map(index).fillna(len(cats)).astype(int).to_numpy()
    counts = np.bincount(codes, minlength=len(cats) + 1).astype(float)
    current = counts / max(counts.sum(), 1.0)
    reference = np.append(np.asarray(profile["shares"], float), profile["other_share"])
    unseen = float(np.mean(codes == len(cats))) if profile.get("complete") else 0.0
    return reference, current, unseen


def feature_drift(
    profile: Mapping[str, Any],
    tasks: pd.DataFrame,
    thresholds: DriftThresholds = DriftThresholds(),
    important: Sequence[str] = IMPORTANT_FEATURES,
    unseen_features: Sequence[str] = UNSEEN_FEATURES,
) -> list[FeatureDrift]:
    """Return the drift of every profiled feature of ``tasks`` against ``profile``.

    A feature drifted when it is in ``important`` and its PSI exceeds the threshold,
    or it is in ``unseen_features`` and too many tasks carry a value never seen.
    """
    if profile.get("format") != PROFILE_FORMAT:
        raise ValueError(
            f"The reference profile format must be {PROFILE_FORMAT}. Got "
            f"{profile.get('format')!r} instead."
        )
    columns = profile_columns(tasks)
    out = []
    for name, spec in profile["features"].items():
        unseen = 0.0
        if spec["kind"] == "categorical":
            reference, current, unseen = _categorical_shares(columns[name], spec)
        else:
            edges = np.asarray(spec["edges"], dtype=float)
            reference = np.asarray(spec["shares"], dtype=float)
            current = _numeric_shares(columns[name].to_numpy(), edges)
        value = psi(reference, current)
        occupied = int(np.sum((np.asarray(reference) > 0) | (np.asarray(current) > 0)))
        expected = expected_psi(occupied, len(tasks), int(profile.get("n_tasks", 0)))
        psi_alarm = name in important
        unseen_alarm = name in unseen_features
        threshold = thresholds.psi + expected
        drifted = (psi_alarm and value > threshold) or (
            unseen_alarm and unseen > thresholds.unseen_share
        )
        out.append(
            FeatureDrift(
                name,
                value,
                unseen,
                psi_alarm or unseen_alarm,
                bool(drifted),
                expected,
                threshold,
                psi_alarm,
                thresholds.unseen_share,
                unseen_alarm,
            )
        )
    return out


def class_drift(
    profile: Mapping[str, Any],
    predicted: Mapping[str, np.ndarray],
) -> dict[str, float]:
    """Return the PSI of the predicted-class distribution per target vs ``profile``."""
    out = {}
    for target, reference in profile.get("predicted_classes", {}).items():
        if target in predicted:
            current = class_shares(np.asarray(predicted[target]), len(reference))
            out[target] = psi(reference, current)
    return out
