"""The old path of the shipped revision ``sajq_0003``'s helpers, now in `sa_jobqueue.migration`.

A shipped revision never changes, so this old path stays. New code imports
`add_flow_control` and `drop_flow_control` from `sa_jobqueue.migration`.
"""

from __future__ import annotations

from sa_jobqueue.migration.ops import add_flow_control, drop_flow_control

__all__ = ["add_flow_control", "drop_flow_control"]
