SELECT sa_jobqueue_schedules_jobs.name, sa_jobqueue_schedules_jobs.kind, sa_jobqueue_schedules_jobs.spec, sa_jobqueue_schedules_jobs.next_run_at, sa_jobqueue_schedules_jobs.last_run_at, sa_jobqueue_schedules_jobs.last_job_id, sa_jobqueue_schedules_jobs.paused_at, sa_jobqueue_schedules_jobs.definition IS NOT NULL AS runtime
FROM sa_jobqueue_schedules_jobs
WHERE sa_jobqueue_schedules_jobs.kind = %(kind_name)s AND starts_with(%(job_key)s, %(param_1)s || sa_jobqueue_schedules_jobs.name || %(param_2)s) ORDER BY length(sa_jobqueue_schedules_jobs.name) DESC
 LIMIT %(param_3)s
