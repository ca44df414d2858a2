"""`family`: one of `PostgresDriver`'s family objects, built on first use.

A family builds its statements when it is made (steps, failures, leases...); an
application that only enqueues asks for none of them, and a worker makes each once.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import cached_property
from typing import Any, TypeVar

from sa_jobqueue.schema.model import JobMixin

__all__ = ["family"]

T = TypeVar("T")


def family(build: Callable[[type[JobMixin]], T]) -> cached_property[T]:
    """A driver attribute holding ``build(driver._model)``, made the first time it is read.

    Two threads reading it first at once may both build it (on Pythons whose
    ``cached_property`` takes no lock): each family is stateless past its statements,
    so either copy serves.
    """

    def built(driver: Any) -> T:
        return build(driver._model)

    return cached_property(built)
