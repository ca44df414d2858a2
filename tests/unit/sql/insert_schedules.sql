INSERT INTO sa_jobqueue_schedules_jobs (name, kind, spec, next_run_at) SELECT known.name, known.kind, known.spec, known.next_run_at
FROM unnest(%(names)s, %(kinds)s, %(specs)s, %(next_run_ats)s) AS known(name, kind, spec, next_run_at) ON CONFLICT (name) DO NOTHING
