"""``<table>_enqueue(...)``: enqueue from SQL, with the checks a Python enqueue makes.

One PL/pgSQL function per jobs table, for what is not Python: a service in another
language, ``psql``, a trigger on the application's own table, an ETL tool. It refuses
what `JobQueue.enqueue` refuses (names, ranges, keys, the payload's size, ``after`` ids
that name no job of the table) with the same ``field=value: problem`` message, under
SQLSTATE ``22023`` (invalid_parameter_value); it returns the new job's id, or the id of
the job that holds a taken idempotency key or an active unique key (as Python does);
``after`` makes the job wait exactly as ``enqueue(after=[...])`` does (the upstream rows
locked and marked, the edges inserted); its INSERT wakes the workers through the
table's notify trigger, at COMMIT. What it cannot know is the Python task: a
``max_attempts`` of NULL takes the table's default, and the queue is the one given.

The same text serves revision ``sajq_0010`` and ``create_all`` (`sa_jobqueue.schema.ddl`),
so neither imports the model; tests/unit/test_enqueue_function.py checks the constants
below against it. See docs/sql.md.
"""

from __future__ import annotations

from sa_jobqueue.core.validation import (
    DEFAULT_MAX_PAYLOAD_BYTES,
    MAX_KEY_LENGTH,
    MAX_NAME_LENGTH,
    NAME_PATTERN,
)
from sa_jobqueue.schema.naming import IDENTIFIER_MAX, check_identifier, dependencies_table_name

__all__ = [
    "ARGUMENTS",
    "MAX_AFTER",
    "create_enqueue_function_sql",
    "drop_enqueue_function_sql",
    "enqueue_function_name",
]

#: The function's arguments, in order, with their SQL types and defaults (docs/sql.md).
ARGUMENTS = (
    ("kind", "text", None),
    ("payload", "jsonb", "'{}'"),
    ("queue", "text", "'default'"),
    ("run_at", "timestamptz", "NULL"),
    ("priority", "integer", "0"),
    ("max_attempts", "integer", "NULL"),
    ("idempotency_key", "text", "NULL"),
    ("unique_key", "text", "NULL"),
    ("after", "bigint[]", "NULL"),
    ("traceparent", "text", "NULL"),
)
#: The most jobs one job may wait for (`sa_jobqueue.enqueue.workflows.MAX_AFTER`).
MAX_AFTER = 1000
#: The table's default ``max_attempts`` (`sa_jobqueue.schema.model.DEFAULT_MAX_ATTEMPTS`).
DEFAULT_MAX_ATTEMPTS = 20
_SIGNATURE = ", ".join(sql_type for _, sql_type, _ in ARGUMENTS)


def enqueue_function_name(table: str) -> str:
    """The SQL function that enqueues into `table`: ``<table>_enqueue``."""
    return f"{table}_enqueue"[:IDENTIFIER_MAX]


def _qualified(name: str, schema: str | None) -> str:
    quoted = f'"{check_identifier(name)}"'
    return f'"{check_identifier(schema)}".{quoted}' if schema else quoted


def drop_enqueue_function_sql(table: str, schema: str | None = None) -> str:
    """``DROP FUNCTION IF EXISTS`` of `table`'s enqueue function."""
    return (
        f"DROP FUNCTION IF EXISTS {_qualified(enqueue_function_name(table), schema)}({_SIGNATURE})"
    )


def create_enqueue_function_sql(
    table: str,
    schema: str | None = None,
    *,
    max_payload_bytes: int = DEFAULT_MAX_PAYLOAD_BYTES,
) -> str:
    """``CREATE OR REPLACE FUNCTION <table>_enqueue(...)`` for the jobs table `table`.

    `max_payload_bytes` is the largest payload it accepts, measured as the text of the
    ``jsonb`` value (the Python enqueue measures its own JSON text: a payload near
    the limit may pass one and not the other).
    """
    name = enqueue_function_name(table)
    function = _qualified(name, schema)
    jobs = _qualified(table, schema)
    edges = _qualified(dependencies_table_name(table), schema)
    p = f'"{name}"'  # the function's own label: its arguments, never a column
    arguments = ",\n    ".join(
        f"{arg} {sql_type}" + (f" DEFAULT {default}" if default else "")
        for arg, sql_type, default in ARGUMENTS
    )
    pattern = NAME_PATTERN.pattern.replace("'", "''")
    # Identifiers were checked plain by _qualified(); the rest are our own constants.
    return f"""
CREATE OR REPLACE FUNCTION {function}(
    {arguments}
) RETURNS bigint
LANGUAGE plpgsql AS $sa_jobqueue$
#variable_conflict use_column
DECLARE
    field text;
    value text;
    upstream bigint[];
    locked bigint[];
    statuses text[];
    missing bigint[];
    unfinished integer;
    failed integer;
    new_status text := 'pending';
    new_error text;
    new_id bigint;
    shown text;
BEGIN
    FOR field, value IN
        SELECT * FROM (VALUES ('kind', {p}.kind), ('queue', {p}.queue)) AS names (field, value)
    LOOP
        shown := quote_nullable(value);
        IF char_length(shown) > 80 THEN shown := left(shown, 77) || '...'; END IF;
        IF value IS NULL THEN
            RAISE EXCEPTION USING ERRCODE = '22023', MESSAGE = field || '=NULL: must not be NULL';
        ELSIF value = '' THEN
            RAISE EXCEPTION USING ERRCODE = '22023',
                MESSAGE = field || '=' || shown || ': must not be empty';
        ELSIF char_length(value) > {MAX_NAME_LENGTH} THEN
            RAISE EXCEPTION USING ERRCODE = '22023',
                MESSAGE = field || '=' || shown || ': must be at most {MAX_NAME_LENGTH} characters';
        ELSIF value !~ '^{pattern}$' THEN
            RAISE EXCEPTION USING ERRCODE = '22023', MESSAGE = field || '=' || shown
                || ': may only hold ASCII letters, digits and _ . : / - '
                || '(and start with a letter, digit or _)';
        END IF;
    END LOOP;
    IF {p}.priority IS NULL OR {p}.priority NOT BETWEEN -32768 AND 32767 THEN
        RAISE EXCEPTION USING ERRCODE = '22023',
            MESSAGE = 'priority=' || coalesce({p}.priority::text, 'NULL')
            || ': must be between -32768 and 32767';
    END IF;
    IF {p}.max_attempts < 1 THEN
        RAISE EXCEPTION USING ERRCODE = '22023', MESSAGE = 'max_attempts=' || {p}.max_attempts
            || ': must be between 1 and 2147483647';
    END IF;
    FOR field, value IN
        SELECT * FROM (VALUES ('idempotency_key', {p}.idempotency_key),
                              ('unique_key', {p}.unique_key)) AS keys (field, value)
    LOOP
        shown := quote_nullable(value);
        IF char_length(shown) > 80 THEN shown := left(shown, 77) || '...'; END IF;
        IF value = '' THEN
            RAISE EXCEPTION USING ERRCODE = '22023',
                MESSAGE = field || '=' || shown || ': must not be empty (use NULL for no key)';
        ELSIF char_length(value) > {MAX_KEY_LENGTH} THEN
            RAISE EXCEPTION USING ERRCODE = '22023',
                MESSAGE = field || '=' || shown || ': must be at most {MAX_KEY_LENGTH} chars';
        END IF;
    END LOOP;
    IF {p}.payload IS NOT NULL AND octet_length({p}.payload::text) > {max_payload_bytes} THEN
        RAISE EXCEPTION USING ERRCODE = '22023', MESSAGE = 'payload=''<'
            || octet_length({p}.payload::text) || ' bytes of JSON>'': is larger than the '
            || '{max_payload_bytes}-byte limit';
    END IF;
    IF {p}.traceparent IS NOT NULL
       AND {p}.traceparent !~ '^[0-9a-f]{{2}}-[0-9a-f]{{32}}-[0-9a-f]{{16}}-[0-9a-f]{{2}}$' THEN
        RAISE EXCEPTION USING ERRCODE = '22023',
            MESSAGE = 'traceparent=' || quote_literal({p}.traceparent)
            || ': is not a W3C traceparent (00-<32 hex trace id>-<16 hex span id>-<2 hex flags>)';
    END IF;

    IF {p}.after IS NOT NULL AND cardinality({p}.after) > 0 THEN
        SELECT array_agg(DISTINCT u ORDER BY u) INTO upstream FROM unnest({p}.after) AS u;
        IF EXISTS (SELECT FROM unnest({p}.after) AS u WHERE u IS NULL OR u <= 0) THEN
            RAISE EXCEPTION USING ERRCODE = '22023', MESSAGE = 'after=' || coalesce((
                SELECT u::text FROM unnest({p}.after) AS u WHERE u IS NULL OR u <= 0 LIMIT 1
            ), 'NULL') || ': is not a job id (a positive bigint)';
        END IF;
        IF cardinality(upstream) > {MAX_AFTER} THEN
            RAISE EXCEPTION USING ERRCODE = '22023', MESSAGE = 'after=''<' || cardinality(upstream)
                || ' jobs>'': a job may wait for at most {MAX_AFTER} jobs; '
                || 'use jobs.batch() for a larger fan-in';
        END IF;
        -- Lock the upstream jobs (in id order) and mark them: an upstream job's end
        -- waits for this transaction, and its release then sees the new edges.
        WITH marked AS (
            UPDATE {jobs} AS j SET has_dependents = true
            WHERE j.id = ANY (upstream) RETURNING j.id, j.status
        )
        SELECT array_agg(marked.id ORDER BY marked.id),
               array_agg(marked.status ORDER BY marked.id)
        INTO locked, statuses FROM marked;
        SELECT array_agg(u ORDER BY u) INTO missing
        FROM unnest(upstream) AS u WHERE u <> ALL (coalesce(locked, '{{}}'));
        IF missing IS NOT NULL THEN
            RAISE EXCEPTION USING ERRCODE = '22023', MESSAGE = 'after=['
                || array_to_string(missing, ', ') || ']: no job with id '
                || array_to_string(missing[1:10], ', ')
                || CASE WHEN cardinality(missing) > 10 THEN ', ...' ELSE '' END
                || ' in table ''{table}''';
        END IF;
        SELECT count(*) FILTER (WHERE s IN ('pending', 'running', 'waiting')),
               min(i) FILTER (WHERE s IN ('failed', 'cancelled'))
        INTO unfinished, failed
        FROM unnest(statuses) WITH ORDINALITY AS t (s, i);
        IF failed IS NOT NULL THEN
            new_status := 'cancelled';
            new_error := 'cancelled: upstream job ' || locked[failed]
                || ' ended ' || statuses[failed];
        ELSIF unfinished > 0 THEN
            new_status := 'waiting';
        END IF;
    END IF;

    FOR attempt IN 1..3 LOOP
        INSERT INTO {jobs} AS j (
            kind, queue, payload, priority, max_attempts, run_at, idempotency_key,
            unique_key, trace_context, status, waiting_for, after_failure, last_error,
            finished_at
        ) VALUES (
            {p}.kind, {p}.queue, coalesce({p}.payload, '{{}}'), {p}.priority,
            coalesce({p}.max_attempts, {DEFAULT_MAX_ATTEMPTS}), coalesce({p}.run_at, now()),
            {p}.idempotency_key, {p}.unique_key,
            CASE WHEN {p}.traceparent IS NOT NULL
                 THEN jsonb_build_object('traceparent', {p}.traceparent) END,
            new_status,
            CASE WHEN upstream IS NOT NULL THEN unfinished END,
            CASE WHEN upstream IS NOT NULL THEN 'cancel' END,
            new_error,
            CASE WHEN new_status = 'cancelled' THEN now() END
        )
        ON CONFLICT DO NOTHING
        RETURNING j.id INTO new_id;
        IF new_id IS NOT NULL THEN
            IF upstream IS NOT NULL THEN
                INSERT INTO {edges} (job_id, upstream_id)
                SELECT new_id, u FROM unnest(upstream) AS u;
            END IF;
            RETURN new_id;
        END IF;
        -- A key is taken: the job that holds it (it keeps its own edges).
        SELECT j.id INTO new_id FROM {jobs} AS j
        WHERE ({p}.idempotency_key IS NOT NULL AND j.idempotency_key = {p}.idempotency_key)
           OR ({p}.unique_key IS NOT NULL AND j.unique_key = {p}.unique_key
               AND j.status IN ('pending', 'running'))
        ORDER BY (j.idempotency_key IS NOT DISTINCT FROM {p}.idempotency_key) DESC, j.id
        LIMIT 1;
        IF new_id IS NOT NULL THEN
            RETURN new_id;
        END IF;
        -- The job holding the key ended between the two statements: insert again.
    END LOOP;
    RAISE EXCEPTION USING ERRCODE = '40001',
        MESSAGE = 'enqueue: the key''s job kept changing under this call; retry it';
END
$sa_jobqueue$"""  # noqa: S608
