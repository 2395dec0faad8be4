"""Resource classes: validation, assignment, fitting from history, YAML round-trip."""

from __future__ import annotations

import math

import numpy as np
import pytest

from panda_predictor.bins_file import BinsFileError, load_bins, save_bins
from panda_predictor.core.bins import (
    UNKNOWN_CLASS,
    BinSet,
    TargetBins,
    fit_bins,
)


def test_assign_range_and_value():
    bins = TargetBins("ramcount", (1000, 2000, 4000), (1000, 2000, 4000, 8000))
    classes = bins.assign([10, 1000, 1999.9, 2000, 5000, np.nan])
    assert classes.tolist() == [0, 1, 1, 2, 3, UNKNOWN_CLASS]
    assert bins.n_classes == 4
    assert bins.range_of(0) == (-math.inf, 1000)
    assert bins.range_of(3) == (4000, math.inf)
    assert bins.value_of(2) == 4000
    assert bins.unit == "MBPerCore"
    assert bins.labels == ("-1000", "1000-2000", "2000-4000", "4000-")


@pytest.mark.parametrize(
    ("target", "values", "expected"),
    [
        pytest.param("cputime", (0.8101, 9.99, 10, 250.2), [(811, "mHS06sPerEvent"),
                     (9990, "mHS06sPerEvent"), (10, "HS06sPerEvent"),
                     (251, "HS06sPerEvent")], id="cputime-milli-switch"),
        pytest.param("ramcount", (1500, 2500.4, 4000, 8000), [(1500, "MBPerCore"),
                     (2501, "MBPerCore"), (4000, "MBPerCore"), (8000, "MBPerCore")],
                     id="ramcount-round-up"),
    ],
)  # fmt: skip
def test_panda_value_of(target, values, expected):
    bins = TargetBins(target, (1, 2, 3), values)
    assert [bins.panda_value_of(c) for c in range(4)] == expected


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        pytest.param(
            {"edges": (2000, 1000), "values": (1, 2, 3)},
            r"The 'edges' of target 'ramcount' must be strictly increasing finite "
            r"numbers\. Got \[2000, 1000\] instead\.",
            id="edges-descending",
        ),
        pytest.param(
            {"edges": (1000, 1000), "values": (1, 2, 3)},
            r"'edges' of target 'ramcount' must be strictly increasing",
            id="edges-repeated",
        ),
        pytest.param(
            {"edges": (1000, math.inf), "values": (1, 2, 3)},
            r"'edges' of target 'ramcount' must be strictly increasing finite",
            id="edge-infinite",
        ),
        pytest.param(
            {"edges": (), "values": (1,)},
            r"'edges' of target 'ramcount' must hold at least one edge",
            id="no-edges",
        ),
        pytest.param(
            {"edges": (1000,), "values": (1, 2, 3)},
            r"The 'values' of target 'ramcount' must be 2 finite numbers "
            r".* Got \[1, 2, 3\]",
            id="values-count",
        ),
        pytest.param(
            {"edges": (1000,), "values": (1, math.nan)},
            r"'values' of target 'ramcount' must be 2 finite numbers",
            id="value-nan",
        ),
        pytest.param(
            {"edges": (1000,), "values": (1, 2), "labels": ("a",)},
            r"The 'labels' of target 'ramcount' must be 2 names",
            id="labels-count",
        ),
    ],
)
def test_target_bins_validation(kwargs, match):
    with pytest.raises(ValueError, match=match):
        TargetBins("ramcount", **kwargs)


@pytest.mark.parametrize(
    ("call", "match"),
    [
        pytest.param(
            lambda b: b.range_of(4),
            r"class of target 'ramcount' must be an "
            r"integer in \[0, 3\]\. Got 4 instead",
            id="range-too-high",
        ),
        pytest.param(
            lambda b: b.value_of(-1),
            r"must be an integer in \[0, 3\]\. Got -1",
            id="value-negative",
        ),
    ],
)
def test_class_out_of_range(call, match):
    bins = TargetBins("ramcount", (1, 2, 3), (1, 2, 3, 4))
    with pytest.raises(ValueError, match=match):
        call(bins)


@pytest.mark.parametrize(
    ("data", "match"),
    [
        pytest.param(
            {"version": "v", "targets": {"memory": {"edges": [1], "values": [1, 2]}}},
            r"targets must be among .*unexpected \['memory'\]",
            id="unknown-target",
        ),
        pytest.param(
            {"version": "v", "targets": {"cputime": {"edges": [1]}}},
            r"Missing \['values'\], unexpected \[\]",
            id="missing-values",
        ),
        pytest.param(
            {"version": "v", "targets": {"cputime": {"edges": 1, "values": [1]}}},
            r"The 'edges' of target 'cputime' must be a list\. Got 1 instead",
            id="edges-not-list",
        ),
        pytest.param(
            {
                "version": "v",
                "targets": {"cputime": {"edges": ["x"], "values": [1, 2]}},
            },
            r"'edges' and 'values' of target 'cputime' must be numbers",
            id="edges-not-numbers",
        ),
        pytest.param(
            {"version": "", "targets": {}},
            r"The 'version' of the bins must be a non-empty string",
            id="no-version",
        ),
        pytest.param(
            {"version": "v"},
            r"must be a mapping with 'version' and a 'targets'",
            id="no-targets",
        ),
    ],
)
def test_bin_set_from_dict_errors(data, match):
    with pytest.raises(ValueError, match=match):
        BinSet.from_dict(data)


def test_fit_bins_uses_quantiles_fixed_io_edge_and_high_value_per_class(seed):
    rng = np.random.default_rng(seed)
    ram = rng.lognormal(7.5, 0.5, 4000)
    io = np.concatenate(
        [rng.uniform(0, 499, 900), rng.uniform(500, 3000, 100), [np.nan]]
    )
    bins = fit_bins({"ramcount": ram, "iointensity": io}, version="test-1")
    assert bins.version == "test-1"
    ramcount = bins["ramcount"]
    np.testing.assert_allclose(ramcount.edges, np.quantile(ram, [0.25, 0.5, 0.75]))
    counts = np.bincount(ramcount.assign(ram), minlength=4)
    assert counts.min() >= 990  # about equal classes
    for cls in range(4):
        inside = ram[ramcount.assign(ram) == cls]
        assert ramcount.value_of(cls) == pytest.approx(np.quantile(inside, 0.95))
        low, high = ramcount.range_of(cls)
        assert low <= ramcount.value_of(cls) < high
    assert bins["iointensity"].edges == (500.0,)
    assert bins["iointensity"].n_classes == 2
    assert "cputime" not in bins


def test_fit_bins_explicit_quantiles_and_empty_class():
    bins = fit_bins(
        {"walltime": [0, 0, 0, 5, 50, 500], "iointensity": [1, 2, 3]},
        quantiles={"walltime": [0.5, 0.8]},
    )
    assert bins["walltime"].edges == (2.5, 50.0)
    assert bins["iointensity"].values == (
        pytest.approx(2.9),
        500.0,
    )  # empty top class: its lower edge


def test_fit_bins_merges_tied_quantiles_with_a_warning():
    with pytest.warns(
        UserWarning, match=r"'walltime': tied quantiles, 3 classes instead of 5"
    ):
        bins = fit_bins({"walltime": [0] * 80 + [100] * 20})
    assert bins["walltime"].edges == (0.0, pytest.approx(20.0))


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        pytest.param(
            {"values_by_target": {"ramcount": [np.nan]}},
            r"values of target 'ramcount' must hold at least one finite number",
            id="no-values",
        ),
        pytest.param(
            {
                "values_by_target": {"ramcount": [1, 2]},
                "quantiles": {"ramcount": [1.5]},
            },
            r"'quantiles' of target 'ramcount' must be numbers in \(0, 1\)\. "
            r"Got \[1.5\]",
            id="bad-quantile",
        ),
        pytest.param(
            {"values_by_target": {"ramcount": [1, 2]}, "value_quantile": 0},
            r"'value_quantile' must be in \(0, 1\]\. Got 0 instead",
            id="bad-value-q",
        ),
        pytest.param(
            {"values_by_target": {"memory": [1, 2]}},
            r"target must be one of .* Got 'memory' instead",
            id="unknown-target",
        ),
    ],
)
def test_fit_bins_errors(kwargs, match):
    with pytest.raises(ValueError, match=match):
        fit_bins(**kwargs)


def test_packaged_defaults_cover_every_target():
    bins = load_bins()
    assert {name: bins[name].n_classes for name in bins.targets} == {
        "ramcount": 4,
        "cputime": 4,
        "iointensity": 2,
        "walltime": 5,
    }
    assert bins["iointensity"].assign([499, 500]).tolist() == [0, 1]
    assert bins["cputime"].unit == "HS06sPerEvent"
    assert bins.version


def test_yaml_round_trip(tmp_path, seed):
    rng = np.random.default_rng(seed)
    fitted = fit_bins(
        {"cputime": rng.lognormal(1, 2, 500), "ramcount": rng.uniform(500, 4000, 500)}
    )
    path = save_bins(fitted, tmp_path / "sub" / "bins.yaml")
    assert load_bins(path) == fitted
    assert path.read_text().startswith("# Resource classes")


@pytest.mark.parametrize(
    ("text", "match"),
    [
        pytest.param(
            "version: v\ntargets: {ramcount: {edges: [3, 2], values: [1, 2, 3]}}\n",
            r"bins file '.*bad\.yaml' is invalid: The 'edges' of target 'ramcount' "
            r"must be strictly increasing",
            id="bad-edges",
        ),
        pytest.param(
            "[1, 2]\n",
            r"bins file '.*bad\.yaml' must hold a mapping.*Got list",
            id="not-a-mapping",
        ),
        pytest.param(
            "version: [\n", r"bins file '.*bad\.yaml' is not valid YAML", id="bad-yaml"
        ),
    ],
)
def test_bins_file_errors_name_the_file(tmp_path, text, match):
    path = tmp_path / "bad.yaml"
    path.write_text(text)
    with pytest.raises(BinsFileError, match=match):
        load_bins(path)


def test_missing_bins_file(tmp_path):
    with pytest.raises(BinsFileError, match=r"bins file '.*nope\.yaml' does not exist"):
        load_bins(tmp_path / "nope.yaml")


def test_assign_values_is_assign_for_plain_floats(seed):
    """One task's rule values are classed on plain floats: the same classes as
    the array route, edges (a value on an edge is in the class above), NaN and
    infinities included."""
    bins = TargetBins("walltime", (100, 1000, 10000), (100, 1000, 10000, 50000))
    rng = np.random.default_rng(seed)
    values = [
        *rng.lognormal(6, 2, 500).tolist(),
        *map(float, bins.edges),
        np.nan,
        math.inf,
        -math.inf,
        0.0,
        -5.0,
    ]
    assert bins.assign_values(values) == bins.assign(values).tolist()
