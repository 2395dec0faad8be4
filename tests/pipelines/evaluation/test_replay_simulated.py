"""The replay of simulated PanDA jobs: scouts, predictor (with its fallback), oracle."""

from __future__ import annotations

import dataclasses
import os

import numpy as np
import pandas as pd
import pytest

from panda_predictor.core.replay.engine import ReplayCase, replay

os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")

from pipelines.evaluation.replay_simulated import (  # noqa: E402
    DEFAULT_SCOUT_RAM_MB,
    ReplayInputs,
    format_outcomes,
    job_table,
    prepare,
    replay_inputs,
    scout_counts,
    with_delay_price,
)


@pytest.fixture(scope="module")
def inputs() -> ReplayInputs:
    return prepare(800, 3)


@pytest.fixture(scope="module")
def outcomes(inputs):
    return {o.strategy: o for o in replay_inputs(inputs)}


def test_strategies_replay_the_same_jobs(inputs, outcomes):
    assert list(outcomes) == [
        "scouts",
        "predictor",
        "request + PanDA re-measurement",
        "oracle",
    ]
    n_tasks = inputs.jobs["jeditaskid"].nunique()
    assert n_tasks == len(inputs.test_tasks)
    for o in outcomes.values():
        assert (o.n_jobs, o.n_tasks) == (len(inputs.jobs), n_tasks)


def test_outcomes_have_sane_ranges(outcomes):
    for o in outcomes.values():
        assert 0.0 <= o.failed_job_rate <= 1.0
        assert o.lost_core_hours >= 0.0 and o.wasted_gb_hours > 0.0
        assert o.wasted_core_hours == 0.0  # memory replay wastes GB-hours only
        assert 0.0 <= o.mean_bulk_delay_hours < 48.0
    assert outcomes["scouts"].mean_bulk_delay_hours > 0.0
    assert outcomes["oracle"].mean_bulk_delay_hours == 0.0


def test_oracle_never_fails_more_than_scouts(outcomes):
    oracle, scouts = outcomes["oracle"], outcomes["scouts"]
    assert oracle.failed_job_rate <= scouts.failed_job_rate
    assert oracle.lost_core_hours <= scouts.lost_core_hours


def test_predictor_applies_some_tasks_and_starts_them_sooner(outcomes):
    predictor, scouts = outcomes["predictor"], outcomes["scouts"]
    assert predictor.mean_bulk_delay_hours < scouts.mean_bulk_delay_hours


def test_a_dearer_delay_writes_safer_memory(inputs):
    # A failed attempt delays its job, so a higher price makes every value at
    # least as large: fewer or as many failures, at least as much waste.
    cheap = {o.strategy: o for o in replay_inputs(with_delay_price(inputs, 0.25))}
    dear = {o.strategy: o for o in replay_inputs(with_delay_price(inputs, 16.0))}
    assert dear["predictor"].wasted_gb_hours > cheap["predictor"].wasted_gb_hours
    assert dear["predictor"].failed_job_rate <= cheap["predictor"].failed_job_rate
    assert dear["scouts"] == cheap["scouts"]  # the price never touches the scouts


def test_unfamiliar_tasks_start_at_once_with_the_queue_default(inputs):
    # Every task outside the training domain (no transformation or framework
    # known, no request in the simulated tasks): every task skips its scouts and
    # asks for what its scouts would without a request, the queue's default.
    bundle = dataclasses.replace(
        inputs.bundle, known_transformations=[], known_frameworks=[], combination=None
    )
    unfamiliar = dataclasses.replace(inputs, bundle=bundle)
    _, predictor, *_ = replay_inputs(unfamiliar)
    jobs = inputs.jobs
    top = DEFAULT_SCOUT_RAM_MB
    expected = replay(
        "predictor",
        ReplayCase(
            "memory",
            task=jobs["jeditaskid"].to_numpy(),
            used=jobs["used_mb"].to_numpy(),
            run_s=jobs["run_s"].to_numpy(),
            cores=jobs["cores"].to_numpy(),
            requested=np.full(len(jobs), float(top)),
            ladder=np.asarray(inputs.bins["ramcount"].values, dtype=float),
            remeasure=True,
        ),
    )
    assert predictor == expected
    assert predictor.mean_bulk_delay_hours == 0.0


def test_job_table_uses_memory_per_core_above_base_and_orders_scouts_first():
    tasks = pd.DataFrame({"jeditaskid": [7], "baseramcount": [1000], "corecount": [8]})
    start = pd.Timestamp("2024-01-01")
    jobs = pd.DataFrame(
        {
            "jeditaskid": [7, 7, 7, 8],
            "jobstatus": ["finished", "finished", "failed", "finished"],
            "specialhandling": [None, "sj", "sj", "sj"],
            "corecount": [8, 0, 8, 1],
            "maxpss": [9000 * 1024, 5000 * 1024, 1, 1],
            "starttime": [start] * 4,
            "endtime": [start + pd.Timedelta(hours=2)] * 4,
        }
    )
    table = job_table(jobs, tasks)
    assert table["scout"].tolist() == [True, False]
    np.testing.assert_allclose(table["used_mb"], [500.0, 1000.0])
    np.testing.assert_allclose(table["run_s"], [7200.0, 7200.0])
    np.testing.assert_allclose(table["cores"], [8.0, 8.0])


def test_the_scouts_row_follows_each_tasks_own_scout_count():
    jobs = pd.DataFrame(
        {
            "jeditaskid": [1, 1, 1, 2, 2, 2, 3],
            "scout": [True, False, False, True, True, False, False],
            "used_mb": [1000.0, 5.0, 5.0, 100.0, 3000.0, 5.0, 5.0],
            "run_s": [3600.0] * 7,
            "cores": [1.0] * 7,
        }
    )
    counts = scout_counts(jobs)
    np.testing.assert_array_equal(counts, [1, 1, 1, 2, 2, 2, 1])  # task 3: none
    task = jobs["jeditaskid"].to_numpy()
    out = replay(
        "scouts",
        ReplayCase(
            "memory",
            task,
            jobs["used_mb"],
            jobs["run_s"],
            jobs["cores"],
            np.full(7, DEFAULT_SCOUT_RAM_MB),
            [DEFAULT_SCOUT_RAM_MB],
            scouts=counts,
        ),
    )
    # Task 1's bulk asks PanDA's measurement of 1000 MB: 1024000 kB x 110 // 100
    # / 1024 = 1100. Task 2's: p75(100, 3000) = 2275 MB = 2329600 kB -> 2562560 ->
    # 2502.5 -> 2502 (rounded down). Task 2's second scout needs 3000: it fails at
    # 2000 and passes at PanDA's next step, 3000. Task 3's one job asks the default.
    # Wasted: every job's spare, plus the failed 2000 MB hour whole.
    wasted = (1000 + 2 * 1095) + (1900 + 0 + 2497) + 1995 + 2000
    assert out.failed_job_rate == pytest.approx(1 / 7)
    assert out.lost_gb_hours == pytest.approx(2000 / 1024)
    assert out.wasted_gb_hours == pytest.approx(wasted / 1024)


def test_format_outcomes_has_a_row_per_strategy(outcomes):
    table = format_outcomes(list(outcomes.values()))
    lines = table.splitlines()
    assert len(lines) == 2 + len(outcomes) + 2
    assert lines[2].startswith("| scouts |") and lines[-3].startswith("| oracle |")
    assert lines[-1].startswith("ramcount, predictor vs scouts:")


@pytest.mark.parametrize(
    "n_tasks", [0, 99, 500.0], ids=["zero", "too-few", "not-an-integer"]
)
def test_prepare_rejects_bad_task_counts(n_tasks):
    with pytest.raises(ValueError, match="The 'n_tasks' field must be an integer"):
        prepare(n_tasks, 1)


def test_memory_written_fixed_is_replayed_without_re_measurement(inputs, monkeypatch):
    import pipelines.evaluation.replay_simulated as simulated

    cases: dict[str, ReplayCase] = {}

    def recording(strategy, case):
        cases[strategy] = case
        return replay(strategy, case)

    monkeypatch.setattr(simulated, "replay", recording)
    simulated.replay_inputs(inputs)
    assert np.asarray(cases["predictor"].remeasure).all()  # PanDA's default
    cost = dataclasses.replace(inputs.bundle.cost, fixed_targets=("ramcount",))
    fixed = dataclasses.replace(
        inputs, bundle=dataclasses.replace(inputs.bundle, cost=cost)
    )
    simulated.replay_inputs(fixed)
    case = cases["predictor"]
    applied = np.asarray(case.scouts) == 0
    remeasure = np.broadcast_to(np.asarray(case.remeasure), applied.shape)
    assert applied.any() and not remeasure[applied].any()
    # A task that kept its scouts holds PanDA's measurement: re-measured.
    assert remeasure[~applied].all()
