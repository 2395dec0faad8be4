"""The cost policy: skip the scouts where the written values cost less than them."""

from __future__ import annotations

import numpy as np
import pytest

from panda_predictor.core.decide.cost_choice import CostChooser, CostSettings
from panda_predictor.core.decide.scout_policy import (
    APPLIED,
    CHEAPER,
    COSTS_MORE,
    KEPT_SCOUTS,
    OUTSIDE_DOMAIN,
    CostPolicy,
    in_training_domain,
    reason_of,
)
from panda_predictor.core.decide.use_table import UseTable

#: walltime: class 0 uses 100 s, class 1 1000 s; iointensity: 10 or 800 kBPerS.
TABLES = {
    "walltime": UseTable(((100.0,) * 4, (1000.0,) * 4)),
    "iointensity": UseTable(((10.0,) * 4, (800.0,) * 4)),
}


def policy(
    price: float = 0.5,
    scouts_value: tuple[str, ...] = (),
    early: bool = False,
    tables: dict[str, UseTable] = TABLES,
) -> CostPolicy:
    settings = CostSettings(
        delay_price=price,
        requeue_runs=0.0,
        scouts_value_targets=scouts_value,
        early_remeasure=early,
    )
    return CostPolicy(
        {
            t: CostChooser(t, table, [row[0] for row in table.points], settings)
            for t, table in tables.items()
        },
        settings,
    )


def decide(
    p_walltime, in_domain=None, price=0.5, request=None, scouts_value=(), early=False
):
    p = np.asarray(p_walltime, dtype=float)
    n = p.shape[0]
    return policy(price, scouts_value, early).decide_table(
        {"walltime": p, "iointensity": np.tile([1.0, 0.0], (n, 1))},
        {"walltime": np.argmax(p, axis=1), "iointensity": np.zeros(n, int)},
        {"walltime": request} if request is not None else None,
        in_domain,
    )


def test_skips_where_the_cheapest_values_cost_no_more_than_the_scouts():
    # Costs (see test_cost_choice): certain class 1 -> 0; (0.5, 0.5) -> 0.136;
    # (0.1, 0.9) -> 0.099. The scouts' first jobs ask for the top class's value
    # 1000 (no request): 0, 0.818 and 0.099 job runs, plus the delay 0.5.
    table = decide([[0.0, 1.0], [0.5, 0.5], [0.1, 0.9]], price=0.5)
    assert table["decision"].tolist() == [APPLIED] * 3
    assert table["reason_kind"].tolist() == [CHEAPER] * 3
    assert table["walltime_value"].tolist() == [1000.0, 100.0, 1000.0]
    assert table["total_cost"] == pytest.approx([0.0, 0.5 * 150 / 550, 0.1 * 900 / 910])
    assert table["scouts_cost"] == pytest.approx(
        [0.5, 0.5 + 0.5 * 900 / 550, 0.5 + 0.1 * 900 / 910]
    )
    assert table["costliest_target"].tolist() == ["walltime"] * 3


def test_outside_the_training_domain_starts_with_what_its_scouts_ask_for():
    # Certain of class 0, the model would write 100; an unfamiliar task ignores it
    # and asks for the scouts' default: no request, so the top class's 1000.
    table = decide([[1.0, 0.0], [1.0, 0.0]], in_domain=[True, False])
    assert table["decision"].tolist() == [APPLIED, APPLIED]
    assert table["reason_kind"].tolist() == [CHEAPER, OUTSIDE_DOMAIN]
    assert table["walltime_value"].tolist() == [100.0, 1000.0]
    assert table["walltime_from_request"].tolist() == [False, False]
    assert table["walltime_cost"][1] == pytest.approx(table["scouts_cost"][1] - 0.5)


@pytest.mark.parametrize("n_tasks", [1, 3], ids=["one-task", "batch"])
def test_a_scouts_value_target_writes_what_its_scouts_ask_for(n_tasks):
    # Certain of class 0 the priced choice writes 100 s; a target whose training
    # found no price better than the scouts' own value writes the request where
    # there is one, else the top class's 1000 s, at the scouts' cost, and the task
    # still starts at once (its cost never exceeds the scouts' plus their delay).
    p = [[1.0, 0.0]] * n_tasks
    request = np.array([np.nan, 400.0, 2000.0][:n_tasks])
    priced = decide(p, request=request)
    table = decide(p, request=request, scouts_value=("walltime",))
    assert priced["walltime_value"].tolist() == [100.0] * n_tasks
    assert table["walltime_value"].tolist() == [1000.0, 400.0, 2000.0][:n_tasks]
    assert table["walltime_from_request"].tolist() == [False, True, True][:n_tasks]
    assert table["walltime_cost"] == pytest.approx(table["scouts_cost"] - 0.5)
    assert table["walltime_confidence"][0] == pytest.approx(1.0)
    assert table["decision"].tolist() == [APPLIED] * n_tasks
    assert table["reason_kind"].tolist() == [CHEAPER] * n_tasks
    # The other target is sized as before.
    assert table["iointensity_value"].tolist() == priced["iointensity_value"].tolist()


@pytest.mark.parametrize("row", [0, 1, 2, None], ids=["t0", "t1", "t2", "batch"])
def test_the_early_remeasurement_marks_tasks_written_their_scouts_values(row):
    # Certain of the top class, task 0 writes 1000 s: no request, so the scouts'
    # own first value. Task 1 writes the model's 100 s. Task 2's request is 100 s:
    # the 100 s it writes is its request, the scouts' value again. (iointensity is
    # not priced: PanDA's re-measurement of it does not count.)
    p = np.array([[0.0, 1.0], [1.0, 0.0], [1.0, 0.0]])
    request = np.array([np.nan, np.nan, 100.0])
    rows = slice(None) if row is None else slice(row, row + 1)
    on = decide(p[rows], request=request[rows], early=True)
    off = decide(p[rows], request=request[rows])
    assert on["walltime_value"].tolist() == [1000.0, 100.0, 100.0][rows]
    assert on["early_remeasure"].tolist() == [True, False, True][rows]
    assert off["early_remeasure"].tolist() == [False, False, False][rows]
    # Only an applied task is marked: one that keeps its scouts runs them.
    marks = policy(early=True)._early(
        np.array([APPLIED, KEPT_SCOUTS]), np.ones(2, bool)
    )
    assert marks["early_remeasure"].tolist() == [True, False]


def time_and_memory(scouts_value: tuple[str, ...]) -> CostPolicy:
    """Two priced targets: run time (100 or 1000 s) and memory (500 or 4000 MB)."""
    tables = {
        "walltime": TABLES["walltime"],
        "ramcount": UseTable(((500.0,) * 4, (4000.0,) * 4)),
    }
    return policy(scouts_value=scouts_value, early=True, tables=tables)


@pytest.mark.parametrize("n_tasks", [1, 2], ids=["one-task", "batch"])
def test_a_scouts_valued_target_has_every_applied_task_re_measured_early(n_tasks):
    # Run time writes its scouts' value for every task; memory is priced and
    # writes the model's 500 MB. PanDA re-measures a task whole, and run time
    # replays as its scouts only when re-measured after 3 jobs: every applied task
    # is marked, though its memory value is the model's own.
    certain = {"walltime": np.tile([1.0, 0.0], (n_tasks, 1))}
    certain["ramcount"] = certain["walltime"]
    fallback = {t: np.zeros(n_tasks, int) for t in certain}
    table = time_and_memory(("walltime",)).decide_table(certain, fallback)
    assert table["ramcount_value"].tolist() == [500.0] * n_tasks
    assert table["walltime_value"].tolist() == [1000.0] * n_tasks
    assert table["early_remeasure"].tolist() == [True] * n_tasks
    # Run time priced as well: the model's values keep the task from the mark.
    priced = time_and_memory(()).decide_table(certain, fallback)
    assert priced["walltime_value"].tolist() == [100.0] * n_tasks
    assert priced["early_remeasure"].tolist() == [False] * n_tasks


def test_the_reasons_say_the_cost_and_the_scouts_cost():
    table = decide([[0.5, 0.5], [1.0, 0.0]], [True, False], 0.5)
    targets = ["walltime", "iointensity"]
    assert reason_of(table, 0, targets, 0.5) == (
        "cheaper than scouts: expected cost 0.14 <= 1.32 job runs (scouts: first "
        "jobs at the default plus 0.50 of delay): walltime 0.14"
    )
    assert reason_of(table, 1, targets, 0.5) == (
        "outside training domain (unknown transformation and framework): starts at "
        "once with what its scouts would ask for (its requests, else the "
        "defaults); PanDA measures it after 5 jobs"
    )
    kept = {
        "reason_kind": np.array([COSTS_MORE], dtype=object),
        "total_cost": np.array([2.0]),
        "scouts_cost": np.array([1.5]),
        "walltime_cost": np.array([2.0]),
        "iointensity_cost": np.array([0.0]),
    }
    assert reason_of(kept, 0, targets, 0.5) == (
        "scouts cost less: expected cost 2.00 > 1.50 job runs (scouts: first jobs "
        "at the default plus 0.50 of delay): walltime 2.00"
    )


def test_the_request_caps_what_is_written():
    table = decide([[0.0, 1.0]], request=np.array([400.0]))
    assert table["walltime_value"].tolist() == [400.0]
    assert table["walltime_from_request"].tolist() == [True]
    assert table["walltime_confidence"].tolist() == [1.0]


@pytest.mark.parametrize(
    ("distribution", "fallback", "domain", "match"),
    [
        ({"walltime": np.ones((1, 2))}, {"cputime": [0]}, None, "same, non-empty"),
        ({"cputime": np.ones((1, 2))}, {"cputime": [0]}, None, "Missing"),
        (
            {"walltime": np.ones((1, 2)), "iointensity": np.ones((2, 2))},
            {"walltime": [0], "iointensity": [0, 0]},
            None,
            r"\(n, K\) array",
        ),
        ({"walltime": np.ones((1, 2))}, {"walltime": [0]}, [True, True], "in_domain"),
    ],
    ids=["target-mismatch", "no-chooser", "length-mismatch", "domain-length"],
)
def test_policy_errors(distribution, fallback, domain, match):
    with pytest.raises(ValueError, match=match):
        policy().decide_table(distribution, fallback, None, domain)


@pytest.mark.parametrize(
    ("transformation", "framework", "expected"),
    [("Reco_tf.py", "x", True), ("new.py", "Athena", True), ("new.py", "New", False)],
    ids=["known-transformation", "known-framework", "both-unknown"],
)
def test_in_training_domain(transformation, framework, expected):
    assert (
        in_training_domain(transformation, framework, {"Reco_tf.py"}, ["Athena"])
        is expected
    )


def test_an_unfamiliar_task_with_requests_starts_at_once_with_them():
    # With a request the task asks for it (never short: use <= request); without
    # one, the top class's value, short as often as the model says it is.
    table = decide(
        [[0.0, 1.0], [0.2, 0.8]],
        in_domain=[False, False],
        request=np.array([700.0, np.nan]),
    )
    assert table["decision"].tolist() == [APPLIED, APPLIED]
    assert table["reason_kind"].tolist() == [OUTSIDE_DOMAIN] * 2
    assert table["walltime_value"].tolist() == [700.0, 1000.0]
    assert table["walltime_from_request"].tolist() == [True, False]
    assert table["walltime_confidence"].tolist() == [1.0, 1.0]


def test_one_task_at_a_time_decides_what_the_batch_decides(seed):
    """Each task alone (the serving route's n = 1) gets its row of the batch,
    whether the batch is all in domain or not, with and without requests."""
    rng = np.random.default_rng(seed)
    tables = {
        "ramcount": UseTable(
            tuple(
                tuple(np.sort(rng.uniform(lo, lo * 2, 5))) for lo in (500, 1500, 3000)
            )
        ),
        "walltime": UseTable(
            tuple(tuple(np.sort(rng.uniform(lo, lo * 3, 5))) for lo in (60, 600, 6000))
        ),
        "iointensity": UseTable(((10.0,) * 3, (800.0,) * 3)),
    }
    settings = CostSettings(delay_price=1.0, requeue_runs=1.0)
    cost_policy = CostPolicy(
        {
            t: CostChooser(t, table, table.array[:, -1], settings)
            for t, table in tables.items()
        },
        settings,
    )
    n = 60
    dists = {t: rng.dirichlet(np.ones(len(tables[t].points)), n) for t in tables}
    fallback = {t: d.argmax(axis=1) for t, d in dists.items()}
    requests = {
        "ramcount": rng.choice([np.nan, 0.0, -1.0, np.inf, 2500.0, 800.0], n),
        "walltime": rng.choice([np.nan, 900.0, 30000.0], n),
    }
    for domain in (rng.random(n) < 0.7, np.ones(n, bool)):
        batch = cost_policy.decide_table(dists, fallback, requests, domain)
        assert set(batch["reason_kind"]) >= {CHEAPER}
        for i in range(n):
            one = cost_policy.decide_table(
                {t: d[i : i + 1] for t, d in dists.items()},
                {t: c[i : i + 1] for t, c in fallback.items()},
                {t: r[i : i + 1] for t, r in requests.items()},
                domain[i : i + 1],
            )
            assert list(one) == list(batch)
            for key, column in batch.items():
                assert one[key].tolist() == column[i : i + 1].tolist(), (key, i)
                assert one[key].dtype == column.dtype, key
