"""A pass JEDI cannot trip on: the kill switch stops it within one transaction, and
a fault that belongs to no task fails it without auditing a task. SQLite and
PostgreSQL (a real role without UPDATE on JEDI_TASKS)."""

from __future__ import annotations

import uuid

import pytest
import sqlalchemy as sa
from click.testing import CliRunner

from panda_predictor.cli import main
from panda_predictor.db.engine import make_engine
from panda_predictor.hook import submit as hook_module
from panda_predictor.hook.report import pass_summary
from panda_predictor.hook.submit import SubmitHook
from panda_predictor.metrics import FALLBACKS
from tests.hook.test_isolation import FakePredictor, add_eligible_tasks, make_hook
from tests.test_db_support import audit_rows, task_row


class SwitchAfterWrites:
    """The real :func:`write_predictions`; touches the kill-switch file after the
    ``n``-th committed write.

    Records every call (failed ones too), so a test can tell that no write was
    even tried after the file appeared.
    """

    def __init__(self, flag, n: int) -> None:
        self.flag = flag
        self.n = n
        self.calls: list[list[int]] = []
        self.after_switch: list[list[int]] = []
        self.committed = 0
        self._real = hook_module.write_predictions

    def __call__(self, engine, settings, predictions, fixed_units=False):
        ids = [p.jeditaskid for p in predictions]
        self.calls.append(ids)
        if self.flag.exists():
            self.after_switch.append(ids)
        result = self._real(engine, settings, predictions, fixed_units)
        self.committed += 1
        if self.committed == self.n:
            self.flag.touch()  # the operator throws the switch now
        return result


def _count_error_audits(monkeypatch) -> list[list[int]]:
    """Record the error-audit transactions the hook opens (the real function)."""
    calls: list[list[int]] = []
    real = hook_module.write_error_audits

    def recording(engine, settings, failures):
        failures = list(failures)
        calls.append([f.jeditaskid for f in failures])
        return real(engine, settings, failures)

    monkeypatch.setattr(hook_module, "write_error_audits", recording)
    return calls


def test_kill_switch_thrown_between_batches_stops_the_pass(
    db, settings, tmp_path, monkeypatch
):
    ids = add_eligible_tasks(db, settings, 5)
    flag = tmp_path / "panda-predictor.off"
    settings = settings.model_copy(
        update={"kill_switch_file": flag, "hook_batch_size": 1}
    )
    writes = SwitchAfterWrites(flag, n=2)
    monkeypatch.setattr(hook_module, "write_predictions", writes)
    errors = _count_error_audits(monkeypatch)
    before = {task_id: task_row(db, settings, task_id) for task_id in ids}

    report = make_hook(settings, FakePredictor(), db).run_once()

    assert report.failure is None
    assert writes.calls == [[ids[0]], [ids[1]]] and writes.after_switch == []
    assert report.applied == ids[:2]
    # The batch in hand when the switch came on: counted, not written, not audited.
    assert report.stopped_by_kill_switch == [ids[2]]
    assert sorted(audit_rows(db, settings)) == ids[:2]
    assert all(task_row(db, settings, t) == before[t] for t in ids[2:])
    assert all(not call for call in errors)
    assert "1 stopped by the kill switch" in pass_summary(report)
    # The next pass runs in legacy mode: the tasks left get their kept_scouts row.
    again = make_hook(settings, FakePredictor(), db).run_once()
    assert sorted(again.kept_scouts) == ids[2:]


def test_kill_switch_thrown_while_a_batch_is_halved_stops_at_the_next_part(
    db, settings, tmp_path, monkeypatch
):
    """Halving writes a batch in several transactions: the switch is read before
    each, so the parts after it are neither written nor audited ``error``."""
    ids = add_eligible_tasks(db, settings, 4)
    poison = ids[3]
    flag = tmp_path / "panda-predictor.off"
    settings = settings.model_copy(
        update={"kill_switch_file": flag, "hook_batch_size": 4}
    )
    writes = SwitchAfterWrites(flag, n=1)  # the whole batch fails, ids[:2] commits
    monkeypatch.setattr(hook_module, "write_predictions", writes)
    errors = _count_error_audits(monkeypatch)

    report = make_hook(settings, FakePredictor(poison, "write"), db).run_once()

    assert report.failure is None
    assert writes.calls == [ids, ids[:2]] and writes.after_switch == []
    assert report.applied == ids[:2] and report.errors == []
    assert report.stopped_by_kill_switch == ids[2:]
    assert sorted(audit_rows(db, settings)) == ids[:2]  # the poison is not audited
    assert errors == []
    assert task_row(db, settings, poison)["splitrule"] == "TI=1,US=2"


@pytest.fixture
def account_without_update(db, settings, tmp_path):
    """Return settings of an account that may read and audit but not UPDATE tasks.

    PostgreSQL: a real login role with SELECT on the test schema and INSERT on the
    audit table only, dropped afterwards. SQLite has no grants: the same database
    file opened read-only.
    """
    if db.dialect.name == "sqlite":
        path = db.url.database
        yield settings.model_copy(
            update={"db_url": f"sqlite:///file:{path}?mode=ro&uri=true"}
        )
        return
    role = f"pp_noupdate_{uuid.uuid4().hex[:8]}"
    schema = settings.db_schema
    admin = sa.create_engine(db.url)
    grants = [
        f"CREATE ROLE {role} LOGIN",
        f"GRANT USAGE ON SCHEMA {schema} TO {role}",
        f"GRANT SELECT ON ALL TABLES IN SCHEMA {schema} TO {role}",
        f"GRANT INSERT ON {schema}.pp_prediction_audit TO {role}",
    ]
    with admin.begin() as conn:
        for statement in grants:
            conn.execute(sa.text(statement))
    url = db.url.set(username=role).render_as_string(hide_password=False)
    try:
        yield settings.model_copy(update={"db_url": url})
    finally:
        with admin.begin() as conn:
            conn.execute(sa.text(f"DROP OWNED BY {role}"))
            conn.execute(sa.text(f"DROP ROLE {role}"))
        admin.dispose()


def test_a_missing_grant_fails_the_pass_and_blames_no_task(
    db, settings, account_without_update
):
    ids = add_eligible_tasks(db, settings, 3)
    # One task per batch: halving has nothing to compare, yet no task is blamed.
    limited = account_without_update.model_copy(update={"hook_batch_size": 1})
    engine = make_engine(limited)
    before = FALLBACKS.labels("db", "DatabaseError")._value.get()
    try:
        report = make_hook(limited, FakePredictor(), engine).run_once()
    finally:
        engine.dispose()

    assert report.failure is not None
    expected = "permission denied" if db.dialect.name == "postgresql" else "readonly"
    assert "lacks a right" in report.failure and expected in report.failure
    assert report.errors == [] and report.applied == []
    assert audit_rows(db, settings) == {}  # still eligible: nothing audited
    assert all(task_row(db, settings, t)["splitrule"] == "TI=1,US=2" for t in ids)
    assert FALLBACKS.labels("db", "DatabaseError")._value.get() == before + 1


def test_hook_once_exits_non_zero_naming_the_missing_grant(
    db, settings, account_without_update, monkeypatch, tmp_path
):
    add_eligible_tasks(db, settings, 2)
    monkeypatch.setattr(SubmitHook, "_champion", lambda self: FakePredictor())
    env = {
        "PANDA_PREDICTOR_HOME": str(tmp_path / "home"),
        "PANDA_PREDICTOR_DB_URL": account_without_update.db_url,
        "PANDA_PREDICTOR_DB_SCHEMA": account_without_update.db_schema or "",
        "PANDA_PREDICTOR_HOOK_BATCH_SIZE": "1",
        "MLFLOW_TRACKING_URI": f"sqlite:///{tmp_path / 'mlflow.db'}",
    }

    result = CliRunner().invoke(main, ["hook", "--once"], env=env)

    assert result.exit_code == 3, result.output
    assert "Failed open" in result.stderr and "lacks a right" in result.stderr
    assert audit_rows(db, settings) == {}


def _wrapped(error_class, message: str) -> Exception:
    """Return the writer's DatabaseError raised from a SQLAlchemy ``error_class``."""
    from panda_predictor.db.engine import DatabaseError

    cause = error_class("UPDATE jedi_tasks", {}, Exception(message))
    wrapped = DatabaseError(f"Writing the prediction of the batch failed: {message}")
    wrapped.__cause__ = cause
    return wrapped


@pytest.mark.parametrize(
    ("error", "no_task"),
    [
        pytest.param(
            _wrapped(sa.exc.ProgrammingError, "permission denied for table x"),
            True,
            id="missing-grant",
        ),
        pytest.param(
            _wrapped(sa.exc.OperationalError, "canceling statement: lock timeout"),
            True,
            id="lock-timeout",
        ),
        pytest.param(
            _wrapped(sa.exc.InternalError, "cache lookup failed"), True, id="internal"
        ),
        pytest.param(
            _wrapped(sa.exc.DataError, "value too long for varchar(200)"),
            False,
            id="row-data",
        ),
        pytest.param(
            _wrapped(sa.exc.IntegrityError, "null value in column model_name"),
            False,
            id="row-constraint",
        ),
        pytest.param(ValueError("reason too long"), False, id="our-own-check"),
    ],
)
def test_which_faults_belong_to_no_task(error, no_task):
    from panda_predictor.hook.isolation import belongs_to_no_task, isolate

    assert belongs_to_no_task(error) is no_task
    if no_task:  # propagates at once, even for a single task: nobody is blamed

        def attempt(part):
            raise error

        with pytest.raises(type(error)):
            isolate([1], attempt, lambda item: item)
