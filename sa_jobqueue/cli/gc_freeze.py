"""The worker command's startup heap, taken out of the cyclic garbage collector's walks.

Only for a process the worker owns (``sa-jobqueue worker``, ``flask ... worker``): a
library must not change the collector's settings in an application that imports it to
enqueue. See docs/performance.md.
"""

from __future__ import annotations

import gc

__all__ = ["freeze_startup_heap"]


def freeze_startup_heap() -> None:
    """Collect once, then freeze what is left: the modules, classes and statements loaded.

    A full collection walks every tracked object, and a worker's imports (SQLAlchemy,
    the application, this package) are most of them and never garbage. Frozen
    (``gc.freeze``), they stay out of every later collection, which then walks what
    jobs allocate. The collection first keeps today's garbage from being frozen with them.
    """
    gc.collect()
    gc.freeze()
