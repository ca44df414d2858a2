"""Application modules that worker processes in the tests import (``tests.support.apps.lesson``)."""

from __future__ import annotations
