"""The goal and choices tables of docs/evaluation.md, from a real benchmark's files."""

from __future__ import annotations

import json

import pytest

from pipelines.evaluation.trace.benchmark import run_benchmark, write_outputs
from pipelines.evaluation.trace.log_walk import WalkForwardConfig
from pipelines.evaluation.trace.summary import (
    CALIBRATION_HEADER,
    CHOICES_HEADER,
    HEADER,
    HINDSIGHT_HEADER,
    METHODS_HEADER,
    TABLES,
    calibration_rows,
    choice_rows,
    hindsight_rows,
    main,
    method_rows,
    summary_rows,
    table_text,
    updated_doc,
)
from tests.pipelines.evaluation.trace.test_trace_benchmark import write_trace


@pytest.fixture(scope="module")
def small_result(tmp_path_factory):
    """Return a small benchmark run with the self-tuned defaults."""
    path = write_trace(tmp_path_factory.mktemp("trace") / "small.swf", 7)
    return run_benchmark(path, WalkForwardConfig(n_estimators=10, test_fraction=0.4))


@pytest.fixture(scope="module")
def full_json(tmp_path_factory, small_result):
    """Return the full.json of :func:`small_result`."""
    folder = tmp_path_factory.mktemp("summary")
    write_outputs(small_result, folder / "out")
    return folder / "out" / "full.json"


def test_a_figure_that_fails_loses_neither_the_report_nor_full_json(
    tmp_path, small_result, monkeypatch
):
    import pipelines.evaluation.trace.benchmark as benchmark

    def broken(full, full_json):
        raise RuntimeError("no canvas")

    monkeypatch.setattr(benchmark, "write_figures", broken)
    with pytest.raises(RuntimeError, match="no canvas"):
        write_outputs(small_result, tmp_path)
    assert (tmp_path / "report.md").read_text() == small_result.report + "\n"
    assert json.loads((tmp_path / "full.json").read_text())["reliability"]


def _cells(row):
    return [cell.strip() for cell in row.strip("|").split("|")]


def test_goal_rows_have_a_cell_per_column(full_json):
    full = json.loads(full_json.read_text())
    rows = summary_rows(full)
    assert {_cells(r)[1] for r in rows} == set(full["production"])
    columns = len(_cells(HEADER.splitlines()[0]))
    for row in rows:
        cells = _cells(row)
        assert len(cells) == columns and cells[0] == "small"
        assert cells[6] in ("**met**", "**not met**")


def test_choice_rows_say_what_each_retraining_chose(full_json):
    full = json.loads(full_json.read_text())
    tuning = full["split"]["self_tuning"]
    header = _cells(CHOICES_HEADER.splitlines()[0])
    assert CHOICES_HEADER.splitlines()[1].count("---") == len(header)
    for row in choice_rows(full):
        cells = dict(zip(header, _cells(row), strict=True))
        assert cells["retrainings"] == str(len(tuning))
        # The early re-measurement ("auto", the default) is chosen per retraining.
        served = [bool(c["cost"]["early_remeasure"]) for c in tuning.values()]
        assert cells["early re-measurement"] == f"{sum(served)} of {len(tuning)}"
        chosen = {c["retrain_every_days"] for c in tuning.values()}
        assert all(f"{d} d" in cells["days to the next retraining"] for d in chosen)
        shares = [int(cells[e].rstrip("%")) for e in ("model", "last2", "key_p75")]
        assert all(0 <= s <= 100 for s in shares)


def test_main_prints_either_table(full_json, capsys):
    main(["--table", "choices", str(full_json)])
    out = capsys.readouterr().out
    assert out.startswith("| log | target | scouts skipped | model |")
    main([str(full_json)])
    assert capsys.readouterr().out.startswith(HEADER)


def _page(tables: list[str]) -> str:
    """Return a Markdown page holding ``tables``, each between two paragraphs."""
    return "# Results\n\n" + "".join(f"{t}\n\nSome text.\n\n" for t in tables)


def test_update_rewrites_every_table_and_nothing_else(full_json, tmp_path, capsys):
    full = json.loads(full_json.read_text())
    fresh = [table_text(name, [full]) for name in TABLES]
    # An old page: each table with a stale row, then its first row dropped.
    stale = [t + "\n| old | row |" for t in fresh[:3]] + [
        "\n".join(t.split("\n")[:2] + t.split("\n")[3:]) for t in fresh[3:]
    ]
    page = tmp_path / "evaluation.md"
    page.write_text(_page(stale))
    main(["--update", str(page), str(full_json)])
    assert capsys.readouterr().out.strip() == f"{page}: tables rewritten"
    assert page.read_text() == _page(fresh)
    main(["--update", str(page), str(full_json)])
    assert capsys.readouterr().out.strip() == f"{page}: unchanged"


def test_update_refuses_a_page_missing_a_table_and_writes_nothing(
    full_json, tmp_path, capsys
):
    full = json.loads(full_json.read_text())
    tables = [table_text(name, [full]) for name in TABLES if name != "hindsight"]
    with pytest.raises(ValueError, match="'hindsight' table once.*Got it 0 times"):
        updated_doc(_page(tables), [full])
    twice = _page([*tables, table_text("hindsight", [full])] * 2)
    with pytest.raises(ValueError, match="'goal' table once.*Got it 2 times"):
        updated_doc(twice, [full])
    page = tmp_path / "evaluation.md"
    page.write_text(_page(tables))
    with pytest.raises(SystemExit) as exit_info:
        main(["--update", str(page), str(full_json)])
    assert exit_info.value.code == 2
    assert "'hindsight' table once" in capsys.readouterr().err
    assert page.read_text() == _page(tables)


def test_hindsight_rows_put_the_chosen_row_beside_the_two_it_mixes(full_json):
    full = json.loads(full_json.read_text())
    assert set(full["hindsight"]) == set(full["replay"]) != set()
    header = _cells(HINDSIGHT_HEADER.splitlines()[0])
    assert HINDSIGHT_HEADER.splitlines()[1].count("---") == len(header)
    rows = hindsight_rows(full)
    assert len(rows) == len(full["hindsight"])
    for row in rows:
        cells = dict(zip(header, _cells(row), strict=True))
        target = cells["target"]
        by_name = {o["strategy"]: o for o in full["replay"][target]}
        scouts = by_name["scouts"]
        assert cells["scouts: failed / wasted / delay"].startswith(
            f"{scouts['failed_job_rate']:.3f} / "
        )
        kept, tasks = cells["tasks kept"].split(" of ")
        assert 0 <= int(kept) <= int(tasks) == scouts["n_tasks"]
        goals = full["hindsight"][target]["goals"]
        assert cells["goals"] == "".join("✓" if v else "✗" for v in goals.values())
        # The tasks are kept within the delay goal's budget (what the production
        # row's own kept tasks wait counts against it).
        mine = full["hindsight"][target]["outcome"]
        ours = by_name["predictor (model:production)"]
        assert mine["mean_bulk_delay_hours"] <= max(
            0.2 * scouts["mean_bulk_delay_hours"], ours["mean_bulk_delay_hours"]
        )


def test_calibration_rows_carry_the_ece_and_its_interval_over_days(full_json):
    full = json.loads(full_json.read_text())
    header = _cells(CALIBRATION_HEADER.splitlines()[0])
    assert CALIBRATION_HEADER.splitlines()[1].count("---") == len(header)
    rows = calibration_rows(full)
    assert rows
    for row in rows:
        cells = dict(zip(header, _cells(row), strict=True))
        ece = float(cells["ECE (top-label)"])
        span, days = cells["90 % interval (days resampled)"].split(" ")
        low, high = (float(v) for v in span.split("-"))
        assert 0 <= low <= high <= 1 and int(days.strip("()")) > 1
        assert cells["ECE <= 0.05"] == ("met" if ece <= 0.05 else "not met")
    # A run recorded before the interval existed prints "-" in its place.
    for per_name in full["calibration"].values():
        for score in per_name.values():
            score.pop("ece_low", None)
    assert all("| - |" in row for row in calibration_rows(full))


def test_method_rows_score_each_method_over_every_file(full_json, capsys):
    full = json.loads(full_json.read_text())
    other = json.loads(full_json.read_text())
    other["file"] = "other.swf"
    for per_name in other["calibration"].values():
        for score in per_name.values():
            score["ece"] = 0.5  # every method misses on the second log
    rows = method_rows([full, other])
    header = _cells(METHODS_HEADER.splitlines()[0])
    pairs = len(full["calibration"])
    methods = {m for per_name in full["calibration"].values() for m in per_name}
    assert len(rows) == len(methods)
    assert rows[-1].startswith("| **top_isotonic+expert** (production) |")
    for row in rows:
        cells = dict(zip(header, _cells(row), strict=True))
        met, of = cells["ECE <= 0.05"].split(" of ")
        assert int(of) == 2 * pairs and int(met) <= pairs
        assert cells["worst ECE"].startswith("0.500 (other ")
    served = [
        s["ece"] for s in (v["model:production"] for v in full["calibration"].values())
    ]
    met = sum(e <= 0.05 for e in served)
    assert f"| {met} of {2 * pairs} |" in rows[-1]
    main(["--table", "methods", str(full_json)])
    assert capsys.readouterr().out.startswith(METHODS_HEADER)


def test_the_reliability_bins_are_those_of_the_ece_in_the_table(full_json):
    # The figure's bins and the table's ECE come from one distribution: the
    # share-weighted gap of the stored bins is the stored top-label ECE, for the
    # served distribution and the one before calibration.
    full = json.loads(full_json.read_text())
    assert full["reliability"].keys() == full["calibration"].keys()
    for target, per_name in full["reliability"].items():
        assert set(per_name) == {"model:production", "calibration:none"}
        n_rows = {sum(bins["n"]) for bins in per_name.values()}
        assert len(n_rows) == 1 and n_rows.pop() > 0
        for name, bins in per_name.items():
            assert len(bins["n"]) == 15 and sum(bins["count"]) == pytest.approx(1.0)
            gap = sum(
                share * abs(acc - conf)
                for share, acc, conf in zip(
                    bins["count"], bins["accuracy"], bins["confidence"], strict=True
                )
                if share > 0
            )
            assert gap == pytest.approx(full["calibration"][target][name]["ece"])
