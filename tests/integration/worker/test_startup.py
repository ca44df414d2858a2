"""`sa-jobqueue worker` opens its first connections while it imports the application."""

from __future__ import annotations

from sqlalchemy import create_engine

from sa_jobqueue.cli.run import _open_connections


def test_the_connections_opened_early_wait_in_the_pool(database_url):
    engine = create_engine(database_url, pool_size=5)
    try:
        _open_connections(engine, 2).join(30)
        assert engine.pool.checkedin() == 2  # type: ignore[attr-defined]
        with engine.connect() as first, engine.connect() as second:
            assert first.exec_driver_sql("SELECT 1").scalar() == 1
            assert second.exec_driver_sql("SELECT 1").scalar() == 1
            assert engine.pool.checkedin() == 0  # type: ignore[attr-defined]
            assert engine.pool.checkedout() == 2  # type: ignore[attr-defined]
    finally:
        engine.dispose()


def test_a_database_out_of_reach_is_left_to_the_start_up_check(caplog):
    # Port 1 refuses at once: nothing is raised, nothing is pooled, and the start-up
    # check (tests/integration/worker/test_worker_start_checks.py) reports and retries it.
    engine = create_engine("postgresql+psycopg://nobody@127.0.0.1:1/nothing", pool_size=5)
    try:
        with caplog.at_level("DEBUG", logger="sa_jobqueue.worker"):
            thread = _open_connections(engine, 2)
            thread.join(30)
        assert not thread.is_alive()
        assert engine.pool.checkedin() == 0  # type: ignore[attr-defined]
        assert "opening connections early failed" in caplog.text
    finally:
        engine.dispose()
