SELECT sa_jobqueue_schedules_jobs.name, sa_jobqueue_schedules_jobs.kind, sa_jobqueue_schedules_jobs.spec, sa_jobqueue_schedules_jobs.next_run_at, sa_jobqueue_schedules_jobs.definition, sa_jobqueue_schedules_jobs.paused_at, now() AS now
FROM sa_jobqueue_schedules_jobs
WHERE sa_jobqueue_schedules_jobs.name = any(%(names)s)
