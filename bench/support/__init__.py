"""What the scenarios share: databases, timing, worker processes, callgrind, results files."""
