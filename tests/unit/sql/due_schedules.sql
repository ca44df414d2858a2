SELECT sa_jobqueue_schedules_jobs.name, sa_jobqueue_schedules_jobs.kind, sa_jobqueue_schedules_jobs.spec, sa_jobqueue_schedules_jobs.next_run_at, sa_jobqueue_schedules_jobs.definition, now() AS now
FROM sa_jobqueue_schedules_jobs
WHERE sa_jobqueue_schedules_jobs.next_run_at <= now() AND sa_jobqueue_schedules_jobs.paused_at IS NULL AND (sa_jobqueue_schedules_jobs.definition IS NOT NULL OR sa_jobqueue_schedules_jobs.name IN (SELECT unnest(CAST(%(names)s AS TEXT[])) AS unnest_1)) ORDER BY sa_jobqueue_schedules_jobs.next_run_at
 LIMIT %(limit)s FOR UPDATE SKIP LOCKED
