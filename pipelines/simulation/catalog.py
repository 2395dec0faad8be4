"""Turn the hidden YAML parameters into numpy lookup arrays for vectorised draws."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from panda_predictor.errors import UserInputError
from pipelines.simulation.config import DriftEvent

#: Numeric per-processing-type parameters, in the order of :attr:`Catalog.ptype_values`.
PTYPE_NUMBERS = (
    "weight",
    "trend",
    "multicore_share",
    "mem_per_core_mb",
    "base_ram_mb",
    "hs06_per_event",
    "hs06_sigma",
    "cpu_efficiency",
    "io_kb_per_s",
    "input_fraction",
    "events_per_job",
    "events_per_file",
    "files_per_dataset",
    "files_sigma",
    "secondary_inputs",
)


@dataclass(frozen=True)
class Catalog:
    """Lookup arrays: processing types, frameworks, releases, sites, campaigns."""

    ptypes: np.ndarray  # processing type names
    ptype_values: dict[str, np.ndarray]  # PTYPE_NUMBERS -> value per processing type
    ptype_strings: dict[str, np.ndarray]  # string attributes per processing type
    framework_probs: np.ndarray  # (n_ptypes, n_frameworks)
    frameworks: np.ndarray
    rel_framework: np.ndarray  # per release: framework index
    rel_version: np.ndarray
    rel_from: np.ndarray  # fraction of the period at which the release appears
    rel_memory: np.ndarray
    rel_cpu: np.ndarray
    rel_arch: np.ndarray
    rel_is_drift: np.ndarray  # the drift-event release (used only from its month)
    halflife_months: float
    campaigns: np.ndarray
    campaign_from: np.ndarray
    sites: np.ndarray
    site_power: np.ndarray
    site_cum_share: np.ndarray


def _arch_for(version: str, architectures: dict[str, str]) -> str:
    major = version.split(".")[0]
    return architectures.get(major, architectures[max(architectures)])


def build_catalog(params: dict[str, Any], drift: DriftEvent | None) -> Catalog:
    """Build the lookup arrays from hidden parameters and an optional drift event."""
    ptypes = params["processing_types"]
    names = list(ptypes)
    values = {
        key: np.array([float(ptypes[n].get(key, 0) or 0) for n in names])
        for key in PTYPE_NUMBERS
    }
    strings = {
        key: np.array([ptypes[n].get(key) for n in names], dtype=object)
        for key in (
            "prodsourcelabel",
            "tasktype",
            "transpath",
            "workinggroup",
            "gshare",
            "input_type",
            "input_format",
            "output_format",
        )
    }
    frameworks = sorted(params["releases"])
    probs = np.zeros((len(names), len(frameworks)))
    for i, name in enumerate(names):
        for fw, share in ptypes[name]["frameworks"].items():
            probs[i, frameworks.index(fw)] = share
    probs /= probs.sum(axis=1, keepdims=True)

    archs = {str(k): v for k, v in params["architectures"].items()}
    rows = [
        (frameworks.index(fw), r["version"], r["from"], r["memory"], r["cpu"], False)
        for fw in frameworks
        for r in params["releases"][fw]
    ]
    if drift is not None:
        if drift.framework not in frameworks:
            raise UserInputError(
                f"The 'transhome' parameter must name a framework among {frameworks}. "
                f"Got {drift.transhome!r} instead."
            )
        rows.append(
            (frameworks.index(drift.framework), drift.version, 1.0, 1.0, 1.0, True)
        )
    rel = list(zip(*rows, strict=True))
    sites = params["sites"]
    share = np.array([s["share"] for s in sites.values()], dtype=float)
    campaigns = params["campaigns"]
    return Catalog(
        ptypes=np.array(names, dtype=object),
        ptype_values=values,
        ptype_strings=strings,
        framework_probs=probs,
        frameworks=np.array(frameworks, dtype=object),
        rel_framework=np.array(rel[0], dtype=np.int64),
        rel_version=np.array([str(v) for v in rel[1]], dtype=object),
        rel_from=np.array(rel[2], dtype=float),
        rel_memory=np.array(rel[3], dtype=float),
        rel_cpu=np.array(rel[4], dtype=float),
        rel_arch=np.array([_arch_for(str(v), archs) for v in rel[1]], dtype=object),
        rel_is_drift=np.array(rel[5], dtype=bool),
        halflife_months=float(params.get("release_halflife_months", 4)),
        campaigns=np.array([c["name"] for c in campaigns], dtype=object),
        campaign_from=np.array([c["from"] for c in campaigns], dtype=float),
        sites=np.array(list(sites), dtype=object),
        site_power=np.array([s["core_power"] for s in sites.values()], dtype=float),
        site_cum_share=np.cumsum(share / share.sum()),
    )


#: A 0-d object array holding None, for ``np.where(mask, value, NULL)`` (SQL NULL).
NULL = np.array(None, dtype=object)


def choose_rows(rng: np.random.Generator, weights: np.ndarray) -> np.ndarray:
    """Draw one column index per row of a (n, k) weight matrix, vectorised."""
    cum = np.cumsum(weights, axis=1)
    u = rng.random(len(weights)) * cum[:, -1]
    return np.minimum((cum < u[:, None]).sum(axis=1), weights.shape[1] - 1)
