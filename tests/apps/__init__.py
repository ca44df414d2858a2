"""Application modules that worker processes in the tests import (``tests.apps.lesson:jobs``)."""

from __future__ import annotations
