import logging

from app import engine, jobs

logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
# Polling only: LISTEN does not work through transaction pooling.
jobs.worker(engine, listen=False, poll_interval=0.5).run()  # until SIGTERM or Ctrl+C
