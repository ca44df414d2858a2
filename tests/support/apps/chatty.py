"""The lesson's jobs in an application that imports Alembic, as a Flask-Migrate app does.

Alembic logs seven INFO lines ("setup plugin ...") when imported: a worker's start
says none of them unless asked (issue 41, item 6). The app's own INFO line shows.
"""

from __future__ import annotations

import logging

import alembic  # noqa: F401  (what ``from flask_migrate import Migrate`` imports)
from tests.support.apps.lesson import jobs

__all__ = ["jobs"]

logging.getLogger("tests.support.apps.chatty").info("the app's own line")
