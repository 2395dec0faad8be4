"""Reading a task's audit row back, as the service's GET returns it (both databases)."""

from __future__ import annotations

from test_db_support import make_prediction

from panda_predictor.db.audit import read_audit
from panda_predictor.db.audit_writer import write_audit


def test_an_audited_task_reads_back_with_iso_dates(db, settings):
    write_audit(db, settings, make_prediction(7, decision="shadow"), written=False)

    with db.connect() as conn:  # a connection and an engine read the same row
        from_conn = read_audit(conn, settings, 7)
    row = read_audit(db, settings, "7")

    assert row == from_conn
    assert row["jeditaskid"] == 7 and row["decision"] == "shadow"
    assert isinstance(row["predicted_at"], str) and row["predicted_at"][4] == "-"
    assert row["written_at"] is None


def test_a_task_never_audited_has_no_row(db, settings):
    assert read_audit(db, settings, 8) is None
