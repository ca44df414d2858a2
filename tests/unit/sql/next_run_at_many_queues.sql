SELECT CAST(EXTRACT(epoch FROM min(jobs.run_at) - now()) AS FLOAT) AS seconds, CAST(EXTRACT(epoch FROM now()) AS FLOAT) AS now
FROM jobs
WHERE jobs.status = 'pending' AND jobs.queue IN ('q0', 'q1', 'q2', 'q3', 'q4', 'q5', 'q6', 'q7', 'q8', 'q9', 'q10', 'q11', 'q12', 'q13', 'q14', 'q15', 'q16', 'q17', 'q18', 'q19', 'q20', 'q21', 'q22', 'q23', 'q24', 'q25', 'q26', 'q27', 'q28', 'q29', 'q30', 'q31', 'q32')
