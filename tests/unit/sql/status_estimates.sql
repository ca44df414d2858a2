SELECT mcv.status, round(c.reltuples * mcv.freq)::bigint AS jobs
        FROM pg_class c
        JOIN pg_namespace n ON n.oid = c.relnamespace
        JOIN pg_stats s ON s.schemaname = n.nspname AND s.tablename = c.relname
        CROSS JOIN LATERAL unnest(s.most_common_vals::text::text[], s.most_common_freqs)
            AS mcv(status, freq)
        WHERE c.relname = %(table)s AND n.nspname = coalesce(%(schema)s, current_schema())
          AND s.attname = 'status' AND c.reltuples >= 0
