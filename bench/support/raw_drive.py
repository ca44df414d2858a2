"""One process of a raw loop over several processes: the raw claim-and-complete loop on ``go``.

Usage: ``python -m bench.support.raw_drive URL BATCH``. It prints ``ready``, waits for a
line on stdin, runs its database's raw loop (`bench.support.throughput.raw_for`) at
BATCH jobs per transaction until no job is due, and prints one JSON line:
``{"start": ..., "end": ..., "processed": ...}`` (``time.monotonic()``, comparable across
processes), as `bench.support.drive` does for the library's worker.
"""

from __future__ import annotations

import json
import sys
import time

from bench.support.throughput import raw_for


def main() -> None:
    url, batch = sys.argv[1], int(sys.argv[2])
    sql = raw_for(url)
    print("ready", flush=True)
    sys.stdin.readline()
    start = time.monotonic()
    done, _ = sql.drain(url, batch)
    end = time.monotonic()
    print(json.dumps({"start": start, "end": end, "processed": done}), flush=True)


if __name__ == "__main__":
    main()
