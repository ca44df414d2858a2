SELECT pg_advisory_xact_lock(hashtextextended(%(hashtextextended_1)s, %(hashtextextended_2)s)) AS pg_advisory_xact_lock_1
