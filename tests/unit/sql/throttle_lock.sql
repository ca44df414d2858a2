SELECT pg_advisory_xact_lock(hashtextextended(%(param_1)s || %(throttle_key)s, %(hashtextextended_1)s)) AS pg_advisory_xact_lock_1
