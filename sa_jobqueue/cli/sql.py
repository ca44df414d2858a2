"""``sa-jobqueue sql``: the SQL function that enqueues into a table, its signature and examples.

Prints what a ``psql`` user, a trigger or a service in another language calls
(`sa_jobqueue.schema.enqueue_function`); no database is needed, and a SQLite or
MariaDB URL given is refused in one line (the function is PL/pgSQL).
See docs/recipes/sql-and-triggers.md.
"""

from __future__ import annotations

import click
from sqlalchemy.engine import make_url

from sa_jobqueue.cli.app import fail, main
from sa_jobqueue.errors import JobQueueError
from sa_jobqueue.schema.enqueue_function import ARGUMENTS, enqueue_function_name
from sa_jobqueue.schema.naming import check_identifier, check_table_name

__all__ = ["sql"]


def signature(table: str, schema: str | None = None) -> str:
    """The enqueue function of `table` as ``CREATE FUNCTION`` declares it, without its body."""
    name = enqueue_function_name(table)
    qualified = f"{schema}.{name}" if schema else name
    arguments = ",\n".join(
        f"    {arg} {sql_type}" + (f" DEFAULT {default}" if default else "")
        for arg, sql_type, default in ARGUMENTS
    )
    return f"{qualified}(\n{arguments}\n) RETURNS bigint"


def examples(table: str, schema: str | None = None) -> list[str]:
    """Calls of `table`'s enqueue function, one per feature."""
    name = enqueue_function_name(table)
    f = f"{schema}.{name}" if schema else name
    return [
        f"SELECT {f}('send_receipt', '{{\"order_id\": 4}}');",
        f"SELECT {f}('send_receipt', '{{\"order_id\": 4}}', queue => 'mail', priority => -1);",
        f"SELECT {f}('nightly_report', run_at => now() + interval '1 hour',"
        " idempotency_key => 'nightly_report:2026-12-04');",
        f"SELECT {f}('notify_customer', unique_key => 'customer:7');",
        f"SELECT {f}('close_invoice', after => ARRAY[41, 42]::bigint[]);",
        f"SELECT {f}('send_receipt', jsonb_build_object('order_id', n))"  # noqa: S608
        " FROM generate_series(1, 1000) AS n;",
    ]


@main.command()
@click.option("--table", default="jobs", show_default=True, help="Name of the jobs table.")
@click.option("--schema", default=None, help="The table's schema (default: the search path).")
@click.option(
    "--database-url",
    envvar="DATABASE_URL",
    default=None,
    help="The database the function is for: PostgreSQL (SQLite and MariaDB have none).",
)
def sql(table: str, schema: str | None, database_url: str | None) -> None:
    """Print the SQL function that enqueues into TABLE: its signature and examples.

    The function (``<table>_enqueue``) is made by ``sa-jobqueue migrate`` (revision
    sajq_0010) and by ``create_all``; it applies the checks of a Python enqueue and
    returns the job's id. See docs/recipes/sql-and-triggers.md.
    """
    if database_url:
        backend = make_url(database_url).get_backend_name()
        if backend != "postgresql":
            fail(
                f"the SQL enqueue function is PL/pgSQL, PostgreSQL only, not {backend}: "
                "enqueue from Python there, or on the app's row events with jobs.enqueue_on",
                2,
            )
    try:
        check_table_name(table)
        if schema is not None:
            check_identifier(schema)
    except JobQueueError as error:
        fail(str(error), 2)
    click.echo(f"-- enqueue into table {table} from SQL (revision sajq_0010):")
    click.echo(signature(table, schema) + ";")
    click.echo("")
    click.echo(
        "-- returns the job's id (for a taken idempotency or unique key: the existing job's);"
    )
    click.echo("-- refuses a bad argument with SQLSTATE 22023 and 'field=value: problem'.")
    for line in examples(table, schema):
        click.echo(line)
