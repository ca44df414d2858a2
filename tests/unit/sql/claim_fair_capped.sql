WITH RECURSIVE walk(key) AS
((SELECT jobs.concurrency_key AS key
FROM jobs
WHERE jobs.status = 'pending' AND jobs.queue = %(queue_name)s AND jobs.kind = %(param_2)s AND jobs.concurrency_key IS NOT NULL ORDER BY jobs.concurrency_key
 LIMIT %(param_3)s) UNION ALL SELECT (SELECT step.concurrency_key
FROM jobs AS step
WHERE step.status = 'pending' AND step.queue = %(queue_name)s AND step.kind = %(param_4)s AND step.concurrency_key > walk.key ORDER BY step.concurrency_key
 LIMIT %(param_5)s) AS anon_1
FROM walk
WHERE walk.key IS NOT NULL),
ranked AS
(SELECT walk.key AS key, head.id AS id, head.priority AS priority, head.run_at AS run_at, head.rank AS rank
FROM walk JOIN LATERAL (SELECT jobs.id AS id, jobs.priority AS priority, jobs.run_at AS run_at, row_number() OVER (ORDER BY jobs.priority, jobs.run_at, jobs.id) AS rank
FROM jobs
WHERE jobs.status = 'pending' AND jobs.queue = %(queue_name)s AND jobs.kind = %(param_6)s AND jobs.run_at <= now() AND NOT (EXISTS (SELECT *
FROM sa_jobqueue_paused_jobs
WHERE sa_jobqueue_paused_jobs.queue = %(queue_name)s)) AND jobs.concurrency_key = walk.key ORDER BY jobs.priority, jobs.run_at, jobs.id
 LIMIT %(limit)s) AS head ON %(param_7)s
WHERE walk.key IS NOT NULL UNION ALL SELECT %(param_8)s AS key, "window".id AS id, "window".priority AS priority, "window".run_at AS run_at, row_number() OVER (ORDER BY "window".priority, "window".run_at, "window".id) AS rank
FROM (SELECT jobs.id AS id, jobs.priority AS priority, jobs.run_at AS run_at, jobs.kind AS kind, jobs.concurrency_key AS concurrency_key
FROM jobs
WHERE jobs.status = 'pending' AND jobs.queue = %(queue_name)s AND jobs.run_at <= now() ORDER BY jobs.priority, jobs.run_at, jobs.id
 LIMIT %(param_9)s) AS "window"
WHERE "window".kind = %(param_10)s AND "window".concurrency_key IS NULL AND NOT (EXISTS (SELECT *
FROM sa_jobqueue_paused_jobs
WHERE sa_jobqueue_paused_jobs.queue = %(queue_name)s))),
keys AS
(SELECT DISTINCT ranked.key AS key
FROM ranked),
state AS
(SELECT keys.key AS key, sa_jobqueue_turns_jobs.pass AS pass, CAST(coalesce(sa_jobqueue_weight_jobs.weight, %(coalesce_1)s) AS FLOAT) AS weight
FROM keys LEFT OUTER JOIN sa_jobqueue_turns_jobs ON sa_jobqueue_turns_jobs.kind = %(param_11)s AND sa_jobqueue_turns_jobs.key = keys.key LEFT OUTER JOIN sa_jobqueue_weight_jobs ON sa_jobqueue_weight_jobs.key = keys.key),
base AS
(SELECT coalesce(min(state.pass), %(coalesce_2)s) AS v
FROM state),
busy AS
(SELECT jobs.concurrency_key AS key, count(*) AS n
FROM jobs
WHERE jobs.status = %(status_1)s AND jobs.kind = %(param_13)s AND jobs.concurrency_key IS NOT NULL GROUP BY jobs.concurrency_key),
fitting AS
(SELECT ranked.id AS id, ranked.key AS key, ranked.priority AS priority, ranked.run_at AS run_at, state.weight AS weight, state.pass IS NULL AS "new", CASE WHEN (state.pass IS NULL) THEN base.v - %(weight_1)s / CAST(state.weight AS FLOAT) ELSE greatest(state.pass, base.v) END + (ranked.rank - %(rank_1)s) / CAST(state.weight AS FLOAT) AS turn
FROM ranked JOIN state ON state.key = ranked.key JOIN base ON %(param_12)s LEFT OUTER JOIN busy ON busy.key = ranked.key
WHERE ranked.key = %(param_14)s OR ranked.rank + coalesce(busy.n, %(coalesce_3)s) <= %(param_15)s),
chosen AS
(SELECT fitting.id AS id, fitting.key AS key, fitting.turn AS turn, fitting.weight AS weight, fitting."new" AS "new", fitting.priority AS priority, fitting.run_at AS run_at
FROM fitting ORDER BY fitting.turn, fitting."new" DESC, fitting.priority, fitting.run_at, fitting.id
 LIMIT %(limit)s),
locked AS
(SELECT jobs.id AS id
FROM jobs
WHERE jobs.id = any(array((SELECT chosen.id
FROM chosen))) AND jobs.status = 'pending' FOR UPDATE SKIP LOCKED),
due AS
(SELECT chosen.id AS id, chosen.key AS key, chosen.turn AS turn, chosen.weight AS weight
FROM chosen JOIN locked ON locked.id = chosen.id ORDER BY chosen.turn, chosen."new" DESC, chosen.priority, chosen.run_at, chosen.id
 LIMIT greatest(%(param_16)s - (SELECT count(*) AS count_1
FROM jobs
WHERE jobs.status = %(status_1)s AND jobs.kind = %(param_13)s), %(greatest_1)s)),
moved AS
(INSERT INTO sa_jobqueue_turns_jobs (kind, key, pass) SELECT %(param_1)s AS kind, due.key AS key, max(due.turn) + %(max_1)s / CAST(max(due.weight) AS FLOAT) AS pass
FROM due GROUP BY due.key ON CONFLICT (kind, key) DO UPDATE SET pass = excluded.pass),
forgotten AS
(DELETE FROM sa_jobqueue_turns_jobs WHERE sa_jobqueue_turns_jobs.kind = %(param_17)s AND (sa_jobqueue_turns_jobs.key NOT IN (SELECT keys.key
FROM keys))),
claimed AS
(UPDATE jobs SET status=%(param_18)s, attempts=(jobs.attempts + %(attempts_1)s), locked_until=(now() + INTERVAL '1 second' * %(param_19)s), locked_by=%(owner)s, updated_at=now() FROM due WHERE jobs.id = due.id RETURNING jobs.id, jobs.kind, jobs.queue, jobs.payload, jobs.attempts, jobs.max_attempts, jobs.idempotency_key, jobs.trace_context, jobs.waiting_for, jobs.has_steps)
 SELECT claimed.id, claimed.kind, claimed.queue, claimed.payload, claimed.attempts, claimed.max_attempts, claimed.idempotency_key, claimed.trace_context, claimed.waiting_for, claimed.has_steps
FROM claimed
