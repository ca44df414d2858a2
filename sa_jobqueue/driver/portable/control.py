"""`PortableControl`: control and notifications in portable statements.

(Being written: issue 38/39. Each operation keeps the guarantee its protocol method's
docstring states, on SQLite and MariaDB, and passes tests/driver/ unchanged.)
"""

from __future__ import annotations

from sa_jobqueue.driver.portable.base import PortableBase

__all__ = ["PortableControl"]


class PortableControl(PortableBase):
    """ControlOps, NotificationOps (`sa_jobqueue.driver.protocol`) for `PortableDriver`."""
